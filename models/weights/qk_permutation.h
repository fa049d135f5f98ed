// Row order of the Q and K projections: llama.cpp's converter permutes them so rope can
// rotate adjacent pairs. Per head h (d = head_dim, i < d/2, j in {0, 1}):
//   GGUF row h*d + 2i + j  holds  HF row h*d + j*d/2 + i.
// Applies equally to the output rows of q_proj/k_proj LoRA B matrices.
#ifndef LOOM_MODELS_WEIGHTS_QK_PERMUTATION_H_
#define LOOM_MODELS_WEIGHTS_QK_PERMUTATION_H_

#include <cstdint>

namespace loom {

// REQUIRES: head_dim even, row >= 0.
inline int64_t HfRowOfGgufRow(int64_t gguf_row, int64_t head_dim) {
  const int64_t h = gguf_row / head_dim, r = gguf_row % head_dim;
  return h * head_dim + (r % 2) * (head_dim / 2) + r / 2;
}

inline int64_t GgufRowOfHfRow(int64_t hf_row, int64_t head_dim) {
  const int64_t h = hf_row / head_dim, r = hf_row % head_dim, half = head_dim / 2;
  return h * head_dim + 2 * (r % half) + r / half;
}

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_QK_PERMUTATION_H_
