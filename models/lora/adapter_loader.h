// LoadAdapter: one entry point for every adapter format, chosen by what the path is.
#ifndef LOOM_MODELS_LORA_ADAPTER_LOADER_H_
#define LOOM_MODELS_LORA_ADAPTER_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/lora/lora_adapter.h"
#include "models/model_config.h"

namespace loom {

// A directory: LoadPeftAdapter (peft_loader.h); a regular file: LoadGgufLora
// (gguf_lora_loader.h), except that an adapter_model.safetensors file loads its directory
// and a pickle (.bin/.pt/.pth) is refused (FailedPrecondition). NotFound when nothing is
// at `path`. The adapter's id is set to `path`.
absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadAdapter(const std::string& path,
                                                        const LlamaConfig& base,
                                                        const AdapterLimits& limits);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_ADAPTER_LOADER_H_
