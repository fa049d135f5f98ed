// Architecture numbers of a Llama-family model, from GGUF metadata or config.json.
#ifndef LOOM_MODELS_MODEL_CONFIG_H_
#define LOOM_MODELS_MODEL_CONFIG_H_

#include <string>

#include "absl/status/status.h"

namespace loom {

// How rope pairs the dimensions of one head (head_dim d, i < d/2):
//   kAdjacentPairs: (x[2i], x[2i+1])  -- llama.cpp's GGUF layout (q/k rows permuted by the
//                                        converter)
//   kHalves:        (x[i], x[i+d/2])  -- Hugging Face's rotate_half layout
enum class RopeLayout { kAdjacentPairs, kHalves };

struct LlamaConfig {
  std::string name;            // general.name or the directory name
  int vocab_size = 0;
  int hidden = 0;              // embedding_length
  int intermediate = 0;        // feed_forward_length
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;            // hidden / n_heads unless the file says otherwise
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int max_context = 2048;      // context_length / max_position_embeddings
  bool tied_embeddings = false;  // no separate output.weight
  RopeLayout rope_layout = RopeLayout::kAdjacentPairs;

  // Checks that the numbers are positive, consistent (heads divide, GQA ratio integral)
  // and small enough that no size computation overflows.
  absl::Status Validate() const;
};

}  // namespace loom

#endif  // LOOM_MODELS_MODEL_CONFIG_H_
