// config.json of a Hugging Face Llama checkpoint <-> LlamaConfig.
#ifndef LOOM_MODELS_WEIGHTS_HF_CONFIG_H_
#define LOOM_MODELS_WEIGHTS_HF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/model_config.h"
#include "nlohmann/json.hpp"

namespace loom {

// Required: architectures containing "LlamaForCausalLM", hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, rms_norm_eps, vocab_size. Optional:
// num_key_value_heads (= heads), head_dim (= hidden / heads), rope_theta (10000),
// max_position_embeddings (2048), tie_word_embeddings (false). A non-null rope_scaling or
// attention/mlp bias is Unimplemented. rope_layout = kHalves. `path` names errors; `name`
// becomes config.name. Not validated (the caller runs Validate()).
absl::StatusOr<LlamaConfig> LlamaConfigFromHfJson(const nlohmann::json& j,
                                                  const std::string& path,
                                                  const std::string& name);

// config.json for `c` (architectures LlamaForCausalLM, model_type llama, torch_dtype
// `torch_dtype`, bos/eos ids when >= 0).
nlohmann::ordered_json HfJsonFromLlamaConfig(const LlamaConfig& c, const std::string& torch_dtype,
                                             int bos_id, int eos_id);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_HF_CONFIG_H_
