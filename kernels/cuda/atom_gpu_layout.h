// The GPU-native layout of Atom quantized weights and activations, and its conversion
// from / to atom_format.h's host structs. Plain C++ (no CUDA headers): the conversion is
// tested on machines without a GPU.
//
// Layout (see atom_gemm_launch.h for how the kernels read it):
//   4-bit rows: value j in nibble (j % 2) of byte j / 2 (low nibble first), two's
//     complement — the consecutive packing mma.sync .s4 reads. (atom_format.h stores
//     value i and i + group/2 of a group in one byte, offset-binary.)
//   8-bit rows: plain int8.
//   Normal part: k_normal_padded values per row (zero padded). Outliers: n_out_pad =
//   round_up(n_outliers, 32) int8 values per row (zero padded).
//   Activations are stored like weights: 4-bit packed when a_bits == 4 (atom_format.h
//   keeps host activations unpacked in int8 lanes).
#ifndef LOOM_KERNELS_CUDA_ATOM_GPU_LAYOUT_H_
#define LOOM_KERNELS_CUDA_ATOM_GPU_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/atom_gpu_geometry.h"
#include "kernels/quant/atom_format.h"

namespace loom::kernels::cuda {

// Largest k the activation quantizer supports (it holds two FP32 rows in shared memory).
inline constexpr int kAtomGpuMaxK = 12288;  // 96 KiB: fits sm_80, sm_89 and sm_90

// The geometry of `spec`. InvalidArgument for an invalid spec; Unimplemented for what the
// GPU kernels do not support: bits other than w4a4 / w4a8 / w8a8, group % 64 != 0, or
// k > kAtomGpuMaxK.
absl::StatusOr<AtomGpuGeometry> AtomGpuGeometryFor(const quant::QuantSpec& spec);

// Host copies in the GPU layout.
struct AtomGpuWeightsHost {
  AtomGpuGeometry geo;
  int rows = 0;
  std::vector<uint8_t> q;               // [rows, weight_row_bytes]
  std::vector<float> scales;            // [rows, n_groups]
  std::vector<int8_t> q_outlier;        // [rows, n_out_pad]
  std::vector<float> outlier_scales;    // [rows]
};
struct AtomGpuActivationsHost {
  AtomGpuGeometry geo;
  int n = 0;
  std::vector<uint8_t> q;               // [n, act_row_bytes]
  std::vector<float> scales;            // [n, n_groups]
  std::vector<int8_t> q_outlier;        // [n, n_out_pad]
  std::vector<float> outlier_scales;    // [n]
};

// atom_format.h weights -> GPU layout. Errors as AtomGpuGeometryFor, plus InvalidArgument
// for rows outside [1, 2^31) or null arrays.
absl::StatusOr<AtomGpuWeightsHost> RepackWeightsForGpu(const quant::AtomWeightView& w);

// atom_format.h activations <-> GPU layout (exact both ways for values in range).
absl::StatusOr<AtomGpuActivationsHost> PackActivationsForGpu(const quant::AtomActivations& x);
absl::StatusOr<quant::AtomActivations> UnpackActivationsFromGpu(
    const quant::QuantSpec& spec, const AtomGpuActivationsHost& x);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_ATOM_GPU_LAYOUT_H_
