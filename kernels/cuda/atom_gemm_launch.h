// Raw launchers of the Atom quantized kernels (atom_gemm.cu), shared by nvcc and gcc code.
// Callers outside kernels/cuda use cuda_atom.h.
//
// GPU-native layouts (device memory; cuda_atom.h converts from atom_format.h's):
//   4-bit rows: value j in nibble (j % 2) of byte j / 2 (low nibble first), two's
//     complement: the consecutive packing mma.sync .s4 reads (atom_format.h's per-group
//     low/high split is repacked once at upload).
//   8-bit rows: plain int8.
//   Rows of the normal part are k_normal_padded values (zero padded); outlier rows are
//   n_out_pad = round_up(n_outliers, 32) int8 values (zero padded).
// Scales as in atom_format.h: per (row, group) for the normal part, per row for outliers.
#ifndef LOOM_KERNELS_CUDA_ATOM_GEMM_LAUNCH_H_
#define LOOM_KERNELS_CUDA_ATOM_GEMM_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/atom_gpu_geometry.h"

namespace loom::kernels::cuda {

struct AtomGpuWeights {
  int rows = 0;                         // output channels
  const uint8_t* q = nullptr;           // [rows, weight_row_bytes]
  const float* scales = nullptr;        // [rows, n_groups]
  const int8_t* q_outlier = nullptr;    // [rows, n_out_pad]
  const float* outlier_scales = nullptr;  // [rows]
};

struct AtomGpuActivations {
  int n = 0;                            // tokens
  uint8_t* q = nullptr;                 // [n, act_row_bytes]
  float* scales = nullptr;              // [n, n_groups]
  int8_t* q_outlier = nullptr;          // [n, n_out_pad]
  float* outlier_scales = nullptr;      // [n]
};

// y [x.n, w.rows] FP32 = atom_format.h's Result, with exactly the canonical float order of
// kernels/quant/reference_atom_kernels.h (acc = fmaf(float(D[g]), sa·sw, acc) per group,
// then the outlier term), so results equal the CPU reference bitwise.
// Normal part: mma.sync m16n8k64 .s4 (w4a4) or m16n8k32 .s8 (w8a8; w4a8 unpacks the
// weight nibbles to int8 in registers); outliers: m16n8k32 .s8.
// REQUIRES (not checked here): x.n >= 1, w.rows >= 1, valid geometry.
cudaError_t LaunchAtomGemm(const AtomGpuGeometry& geo, const AtomGpuWeights& w,
                           const AtomGpuActivations& x, float* y, cudaStream_t stream);

// Activation quantization, one block per row (atom_format.h's rule, bitwise as
// QuantizeActivationRow):
//   mode kPlain:   h = x (source order)
//   mode kRmsNorm: h = x / sqrt(mean(x^2) + eps) * gamma (FP32, block-reduced sum)
//   mode kSiluMul: h = silu(x) * up (x = gate), in double, rounded to float
// then hp[j] = h[perm[j]] (perm null: identity), quantized into `out` (n = rows).
// permuted (nullable): receives hp [n, k] unquantized.
enum class AtomPrologue : int { kPlain = 0, kRmsNorm = 1, kSiluMul = 2 };

// The Hadamard transform T = scale · (H_K ⊗ H_P) · diag(signs) of
// kernels/rotation/hadamard_transform.h in device memory (POD, passed to kernels). n == 0:
// no rotation.
struct GpuHadamard {
  int n = 0;                     // K * P
  int k = 1;                     // K
  int p = 1;                     // P (a power of two); the B = n / (K P) blocks follow
  float scale = 1.0f;
  const int8_t* hk = nullptr;    // device [K, K] of ±1
  const float* signs = nullptr;  // device [n] or null
};

cudaError_t LaunchAtomQuantize(const AtomGpuGeometry& geo, AtomPrologue mode, const float* x,
                               const float* gamma_or_up, float eps, const int32_t* perm,
                               int n, const AtomGpuActivations& out, float* permuted,
                               cudaStream_t stream);

// As LaunchAtomQuantize (modes kPlain and kSiluMul) with the online rotation after the
// reorder: the first rot.n channels of hp <- T hp[0, rot.n) in the canonical sequence of
// hadamard_transform.h (sign flips, butterflies h = 1 .. P/2, the cross-run ±1 sums in
// order, the scale; each an IEEE-rounded add, subtract or multiply), so hp and the
// quantized rows equal the CPU reference's (ReferenceAtomKernels::HadamardQuantize /
// SiluMulHadamardQuantize) bitwise. REQUIRES rot.n <= geo.k.
cudaError_t LaunchAtomHadamardQuantize(const AtomGpuGeometry& geo, AtomPrologue mode,
                                       const float* x, const float* up, const GpuHadamard& rot,
                                       const int32_t* perm, int n, const AtomGpuActivations& out,
                                       float* rotated, cudaStream_t stream);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_ATOM_GEMM_LAUNCH_H_
