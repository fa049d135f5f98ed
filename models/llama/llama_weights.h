// The weights of a Llama model bound to kernel views: one WeightMatrix per projection
// (in its stored type, pointing into the ModelSource's mapping) and FP32 norm vectors.
#ifndef LOOM_MODELS_LLAMA_LLAMA_WEIGHTS_H_
#define LOOM_MODELS_LLAMA_LLAMA_WEIGHTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "models/weights/model_source.h"

namespace loom {

struct LlamaLayerWeights {
  kernels::WeightMatrix q, k, v, o;  // q: [n_heads*hd, hidden]; k, v: [n_kv*hd, hidden]
  kernels::WeightMatrix gate, up;    // [intermediate, hidden]
  kernels::WeightMatrix down;        // [hidden, intermediate]
  std::vector<float> attn_norm;      // [hidden]
  std::vector<float> ffn_norm;       // [hidden]
};

struct LlamaWeights {
  kernels::WeightMatrix token_embd;  // [vocab, hidden]
  kernels::WeightMatrix output;      // [vocab, hidden]; token_embd when tied
  std::vector<float> output_norm;    // [hidden]
  std::vector<LlamaLayerWeights> layers;

  // Binds and shape-checks every tensor of `src` (which must outlive the result).
  static absl::StatusOr<LlamaWeights> Bind(const ModelSource& src);
};

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_LLAMA_WEIGHTS_H_
