// Loads a llama.cpp GGUF-LoRA file: general.type "adapter", adapter.type "lora",
// adapter.lora.alpha (f32, optional); tensors blk.N.<stem>.weight.lora_a with
// ne = [n_in, r] (row-major [r, n_in]) and blk.N.<stem>.weight.lora_b with ne = [r, n_out]
// (row-major [n_out, r]), F32/F16/BF16/Q8_0. scale = alpha / r, and 1 when alpha is 0 or
// absent (as llama.cpp). The file is in GGUF row order: on a base in Hugging Face layout
// (rope_layout kHalves) the B rows of attn_q/attn_k are permuted back to HF order.
// Refusals as in peft_loader.h (NotFound / FailedPrecondition / InvalidArgument).
#ifndef LOOM_MODELS_LORA_GGUF_LORA_LOADER_H_
#define LOOM_MODELS_LORA_GGUF_LORA_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/lora/lora_adapter.h"
#include "models/model_config.h"

namespace loom {

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadGgufLora(const std::string& path,
                                                         const LlamaConfig& base,
                                                         const AdapterLimits& limits);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_GGUF_LORA_LOADER_H_
