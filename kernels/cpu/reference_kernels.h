// Plain scalar, obviously-correct row kernels shared by ReferenceBackend and the scalar
// fallback of CpuBackend. Accumulation is in double; results are rounded to float once.
#ifndef LOOM_KERNELS_CPU_REFERENCE_KERNELS_H_
#define LOOM_KERNELS_CPU_REFERENCE_KERNELS_H_

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace loom::kernels::ref {

// Dot of one quantized weight row (nb blocks of type t: kQ8_0, kQ4_0 or kQ4_1) with nb
// activation blocks, with llama.cpp's semantics: per block an exact integer dot isum of
// the stored integers, then
//   Q8_0: d_w * d_x * isum      Q4_0: d_w * d_x * isum (nibbles minus 8)
//   Q4_1: d_w * d_x * isum + m_w * s_x (raw nibbles)
// summed over blocks in double. If abs_scale is non-null it receives the sum of the
// absolute values of the per-block terms (the error scale used by the tests).
float DotQ8(DType t, const uint8_t* wrow, const BlockQ8Act* x, int nb,
            double* abs_scale = nullptr);

// Dot of one float-typed weight row (kF32, kF16 or kBF16, k elements) with x [k].
float DotFloat(DType t, const uint8_t* wrow, const float* x, int k,
               double* abs_scale = nullptr);

// y [dim] = x / sqrt(mean(x^2) + eps) * gamma. y may alias x.
void RmsNormRow(const float* x, const float* gamma, int dim, float eps, float* y);

// silu(g) * u = g / (1 + exp(-g)) * u.
float SiluMul(float g, float u);

// Rotary angles of position pos: for i < head_dim / 2, angle = pos * theta^(-2i/head_dim)
// (computed in double), cos_out[i] / sin_out[i] rounded to float. Shared by every CPU
// backend so that they rotate by the same constants.
void RopeCosSin(int32_t pos, int head_dim, float theta, float* cos_out, float* sin_out);

// Rotates one head vector x [head_dim] in place with the angles from RopeCosSin.
// adjacent_pairs: pairs (2i, 2i+1); else (i, i + head_dim / 2).
void RopeHead(float* x, const float* cos_v, const float* sin_v, int head_dim,
              bool adjacent_pairs);

// Address of the K (or V) row (layout.row_bytes() bytes, layout.dtype) of `kv_head` at
// absolute position `pos` of the sequence whose page list starts at `pages`.
inline const uint8_t* KvRow(const KvLayout& l, const uint8_t* pool, const int32_t* pages,
                            int32_t pos, int kv_head) {
  const int64_t page = pages[pos / l.page_size];
  const int64_t slot = pos % l.page_size;
  return pool + ((page * l.page_size + slot) * l.n_kv_heads + kv_head) *
                    static_cast<int64_t>(l.row_bytes());
}
inline uint8_t* KvRowMut(const KvLayout& l, uint8_t* pool, const int32_t* pages, int32_t pos,
                         int kv_head) {
  return const_cast<uint8_t*>(KvRow(l, pool, pages, pos, kv_head));
}

// Attention of one query head of token t (two-pass softmax in double) over the cached rows
// decoded by DequantizeKvRow. q_head, out_head: [head_dim]. scratch: at least
// positions[t] + 1 doubles. row: head_dim floats.
void AttentionHead(const KvLayout& l, const AttentionBatch& b, int t, int head,
                   int n_heads, const float* q_head, const uint8_t* k_pool,
                   const uint8_t* v_pool, double* scratch, float* row, float* out_head);

}  // namespace loom::kernels::ref

#endif  // LOOM_KERNELS_CPU_REFERENCE_KERNELS_H_
