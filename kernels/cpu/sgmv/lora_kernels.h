// Per-ISA LoRA dot kernels behind CpuLoraOps (internal to //kernels/cpu/sgmv).
//
// Both SGMV halves are blocks of dot products between FP32 rows X and BF16 rows W:
//   shrink: X = x [T, h_in], W = A [rank, h_in],  v[t, r]  = dot(x[t], A[r])
//   expand: X = v [T, >=rank], W = B [h_out, rank], y[t, o] = fma(scale, dot(v[t], B[o]), y[t, o])
//
// The canonical dot (every ISA implements exactly this sequence, so the scalar and AVX2
// kernels agree bitwise, and so do all tile shapes, thread counts and batch layouts):
//   acc[0..8) = +0
//   for each 16-element chunk c of K (the last one zero padded):
//     for i in 0..8: acc[i] = fmaf(x[16c + 2i],     w[16c + 2i],     acc[i])
//                    acc[i] = fmaf(x[16c + 2i + 1], w[16c + 2i + 1], acc[i])
//   dot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
// (AVX2: one 8-lane accumulator; a 256-bit load of 16 BF16 split into even/odd lanes by a
// shift and a mask, x de-interleaved to match; the sum is the hadd tree.)
#ifndef LOOM_KERNELS_CPU_SGMV_LORA_KERNELS_H_
#define LOOM_KERNELS_CPU_SGMV_LORA_KERNELS_H_

#include <cstdint>

namespace loom::kernels::sgmv {

// pf_next / pf_bytes: the next work item's weights; kernels may prefetch them while they
// compute (nullptr / 0: none). Prefetching never changes results.
struct LoraKernelTable {
  // v[t * v_stride + r] = dot(x + t * x_stride, a + r * h_in) over h_in elements,
  // for t in [0, n_tokens), r in [r_begin, r_end).
  void (*shrink)(const float* x, int64_t x_stride, int n_tokens, const uint16_t* a, int h_in,
                 int r_begin, int r_end, float* v, int64_t v_stride, const void* pf_next,
                 int64_t pf_bytes);
  // y[t * y_stride + o] = fmaf(scale, dot(v + t * v_stride, b + o * rank), y[...]) over
  // rank elements, for t in [0, n_tokens), o in [o_begin, o_end).
  void (*expand)(const float* v, int64_t v_stride, int n_tokens, const uint16_t* b, int rank,
                 float scale, int o_begin, int o_end, float* y, int64_t y_stride,
                 const void* pf_next, int64_t pf_bytes);
};

// Always available.
const LoraKernelTable* ScalarLoraKernels();
// REQUIRES: the CPU supports AVX2 and FMA (see Avx2LoraSupported()).
const LoraKernelTable* Avx2LoraKernels();
bool Avx2LoraSupported();

}  // namespace loom::kernels::sgmv

#endif  // LOOM_KERNELS_CPU_SGMV_LORA_KERNELS_H_
