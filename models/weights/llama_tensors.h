// The tensors a Llama model needs, under their canonical (GGUF) names, and the check that
// a loaded set has all of them with the shapes the config implies.
#ifndef LOOM_MODELS_WEIGHTS_LLAMA_TENSORS_H_
#define LOOM_MODELS_WEIGHTS_LLAMA_TENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "models/model_config.h"
#include "models/weights/model_source.h"

namespace loom {

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;  // row-major
  bool required = true;
};

// Every tensor of a Llama model with config `c`, row-major shapes:
//   token_embd.weight [vocab, hidden]; output_norm.weight [hidden];
//   output.weight [vocab, hidden] (required unless c.tied_embeddings, absent if tied);
//   blk.N.attn_norm/ffn_norm [hidden]; attn_q [n_heads*head_dim, hidden];
//   attn_k/attn_v [n_kv_heads*head_dim, hidden]; attn_output [hidden, n_heads*head_dim];
//   ffn_gate/ffn_up [intermediate, hidden]; ffn_down [hidden, intermediate].
std::vector<ExpectedTensor> LlamaTensorList(const LlamaConfig& c);

// OK if every required tensor is present with its expected shape and every present
// expected tensor has its shape; otherwise InvalidArgument naming `path`, the tensor, the
// expected and the actual shape. Tensors not in the list are allowed.
absl::Status CheckLlamaTensors(const std::string& path, const LlamaConfig& c,
                               const std::map<std::string, WeightTensor>& tensors);

std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_LLAMA_TENSORS_H_
