// Loads LoRA adapters against a base model: PEFT directories, llama.cpp GGUF-LoRA files,
// and LoadAdapter dispatching on what the path is.
//
// Refusals (each a Status naming the file and, where there is one, the tensor):
//   NotFound            the path, adapter_config.json or adapter_model.safetensors missing
//   FailedPrecondition  malformed or unsupported content: a pickle adapter_model.bin, bad
//                       JSON, truncated/corrupt tensor data, NaN/Inf weights, rank 0 or
//                       above AdapterLimits::max_rank, unknown target modules, missing or
//                       unexpected tensors, unsupported dtypes, and PEFT features Loom does
//                       not implement (use_dora, modules_to_save, bias other than "none",
//                       lora_bias, embedding or lm_head LoRA, layer_replication,
//                       trainable_token_indices, target_parameters, QALoRA, aLoRA)
//   InvalidArgument     shapes that do not fit this base (expected vs actual), layers
//                       beyond the base's layer count, an invalid base config
// A failed load allocates nothing that outlives the call.
#ifndef LOOM_MODELS_LORA_PEFT_LOADER_H_
#define LOOM_MODELS_LORA_PEFT_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/lora/lora_adapter.h"
#include "models/model_config.h"

namespace loom {

// A PEFT adapter directory: adapter_config.json + adapter_model.safetensors (F32, F16 or
// BF16 tensors `base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight` [r, in]
// and `...lora_B.weight` [out, r]).
//   scale = lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora; rank_pattern and
//   alpha_pattern override r and lora_alpha per module (PEFT's matching: an exact module
//   path, else the first key k, in file order, with regex (.*\.)?(k)$ matching the whole
//   module path "model.layers.N.self_attn.q_proj").
//   target_modules: a list (an entry matches a module path equal to it or ending in
//   ".entry"), a regex string (must match the whole module path), "all-linear", or null
//   (PEFT's Llama default q_proj, v_proj); exclude_modules and layers_to_transform narrow it.
//   fan_in_fan_out: PEFT itself keeps lora_A [r, in] / lora_B [out, r] whatever this flag
//   says (it only transposes the merged delta for Conv1D bases); with the flag set, files
//   storing them transposed ([in, r] / [r, out]) are accepted too, told apart by shape.
// The adapter is in Hugging Face row order; when base.rope_layout is kAdjacentPairs (the
// base came from GGUF) the B rows of q_proj and k_proj are permuted to GGUF order.
absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadPeftAdapter(const std::string& dir,
                                                            const LlamaConfig& base,
                                                            const AdapterLimits& limits);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_PEFT_LOADER_H_
