// Per-ISA LoRA dot kernels behind CpuLoraOps (internal to //kernels/cpu/sgmv).
//
// Shrink (x [T, h_in] FP32, A [rank, h_in] BF16): v[t, r] = dot_shrink(x[t], A[r]), where
//   acc[0..8) = +0
//   for each 16-element chunk c of h_in (the last one zero padded):
//     for i in 0..8: acc[i] = fmaf(x[16c + 2i],     a[16c + 2i],     acc[i])
//                    acc[i] = fmaf(x[16c + 2i + 1], a[16c + 2i + 1], acc[i])
//   dot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
// (AVX2: one 8-lane accumulator per (token, row); a 256-bit load of 16 BF16 split into
// even/odd lanes by a shift and a mask, x de-interleaved to match; the sum is a hadd tree.)
//
// Expand (v [T, >=rank] FP32, B [h_out, rank] BF16):
//   y[t, o] = fmaf(scale, dot_expand(v[t], B[o]), y[t, o]), where
//   e = +0, d = +0
//   for i in 0..ceil(rank / 2): e = fmaf(v[2i], b[2i], e)
//                               d = fmaf(v[2i + 1], b[2i + 1], d)   (0, 0 past the rank)
//   dot = e + d
// (AVX2: vectorised over 8 outputs: B's 8 x rank block is transposed to FP32 columns once
// and reused for every token of the work item, so no horizontal sums are needed.)
//
// Every ISA implements exactly these sequences, so the scalar and AVX2 kernels agree
// bitwise, and so do all tile shapes, thread counts and batch layouts.
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
