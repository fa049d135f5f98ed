#include "models/lora/adapter_loader.h"

#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "models/lora/gguf_lora_loader.h"
#include "models/lora/peft_loader.h"

namespace loom {

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadAdapter(const std::string& path,
                                                        const LlamaConfig& base,
                                                        const AdapterLimits& limits) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    return absl::NotFoundError(absl::StrFormat("%s: no such adapter file or directory", path));
  }
  absl::StatusOr<std::unique_ptr<LoraAdapter>> ad;
  if (S_ISDIR(sb.st_mode)) {
    ad = LoadPeftAdapter(path, base, limits);
  } else if (absl::EndsWith(path, ".bin") || absl::EndsWith(path, ".pt") ||
             absl::EndsWith(path, ".pth")) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: a PyTorch pickle file; Loom loads only safetensors (PEFT) or GGUF-LoRA adapters "
        "(convert it with PEFT's save_pretrained(safe_serialization=True))",
        path));
  } else if (absl::EndsWith(path, ".safetensors")) {
    const size_t slash = path.rfind('/');
    ad = LoadPeftAdapter(slash == std::string::npos ? "." : path.substr(0, slash), base, limits);
  } else {
    ad = LoadGgufLora(path, base, limits);
  }
  if (!ad.ok()) return ad.status();
  (*ad)->set_id(path);
  return ad;
}

}  // namespace loom
