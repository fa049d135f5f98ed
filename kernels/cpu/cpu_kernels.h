// Internal to CpuBackend: per-ISA kernel tables. Each table's functions compute every
// output element with one fixed sequence of operations that does not depend on how many
// rows are processed together, which rows are neighbours, or where a thread's range
// starts (the batch-invariance contract of backend.h).
#ifndef LOOM_KERNELS_CPU_CPU_KERNELS_H_
#define LOOM_KERNELS_CPU_CPU_KERNELS_H_

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_isa.h"

namespace loom::kernels::cpu {

struct KernelTable {
  const char* name;
  // For weight rows r in [r0, r1) and activation rows c < n:
  //   y[c * y_stride + r] = dot(W row r, x row c).
  // Quantized weights: x is n rows of nb Q8 blocks. Float weights: x is n rows of k floats.
  void (*matmul_q8)(const WeightMatrix& w, const BlockQ8Act* x, int n, int nb, int64_t r0,
                    int64_t r1, float* y, int64_t y_stride);
  void (*matmul_f32)(const WeightMatrix& w, const float* x, int n, int k, int64_t r0,
                     int64_t r1, float* y, int64_t y_stride);
  // Bitwise identical to QuantizeRowQ8.
  void (*quantize_row)(const float* x, int k, BlockQ8Act* out);
  void (*rmsnorm_row)(const float* x, const float* gamma, int dim, float eps, float* y);
  void (*silu_mul)(const float* gate, const float* up, int64_t count, float* y);
  // Round-to-nearest-even FP32 -> FP16 of `count` values.
  void (*fp32_to_fp16)(const float* x, int count, uint16_t* y);
  // Attention of token t for the query heads that read kv heads [kv0, kv1) (heads
  // kv0 * g .. kv1 * g - 1, g = n_heads / l.n_kv_heads; see Backend::PagedAttention).
  // q_tok, out_tok: [n_heads, head_dim] of token t; only those heads are read and written.
  // Each head's result does not depend on kv0/kv1. Vector tables handle
  // VectorAttentionSupported(l) shapes; others use the scalar table's function.
  void (*attention_heads)(const KvLayout& l, const AttentionBatch& b, int t, int kv0, int kv1,
                          int n_heads, const float* q_tok, const uint8_t* k_pool,
                          const uint8_t* v_pool, float* out_tok);
};

inline constexpr int kMaxVecHeadDim = 256;

// head_dim a multiple of 8 (of 16 for kInt4: two 8-lane halves) and at most kMaxVecHeadDim.
inline bool VectorAttentionSupported(const KvLayout& l) {
  const int mult = l.dtype == KvDtype::kInt4 ? 16 : 8;
  return l.head_dim % mult == 0 && l.head_dim <= kMaxVecHeadDim;
}

const KernelTable* ScalarKernels();
const KernelTable* Avx2Kernels();
const KernelTable* Avx512VnniKernels();

}  // namespace loom::kernels::cpu

#endif  // LOOM_KERNELS_CPU_CPU_KERNELS_H_
