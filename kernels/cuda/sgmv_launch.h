// Raw launchers of the SGMV / BGMV CUDA kernels (sgmv.cu), shared by nvcc and gcc code.
// Callers outside kernels/cuda use cuda_lora_ops.h.
//
// Every pointer here is a DEVICE pointer, including the segment metadata: the kernels
// read each segment's token range, rank, scale and weight pointers from device memory,
// so a launch needs no host-side knowledge of the segments (no host sync; the metadata
// is built once per step and reused by every projection and layer; CUDA-graph safe).
//
// Numerics (fixed order, so batch invariant and SGMV == BGMV bitwise on one device):
//   shrink: h_in is cut into kSgmvChunk-wide splits; in split c, lane l of a warp sums
//     x[t,k]·A[r,k] with fmaf over its 16 elements k = c·512 + {l·8..l·8+7, 256+l·8..+7}
//     in that order, then a 5-step xor butterfly; splits are added in order 0, 1, ...
//     (one split: written directly). Depends only on h_in, never on the batch.
//   expand: acc = Σ_r v[t,r]·B[o,r] with fmaf in r order; y[t,o] += scale·acc.
#ifndef LOOM_KERNELS_CUDA_SGMV_LAUNCH_H_
#define LOOM_KERNELS_CUDA_SGMV_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/lora_ops.h"

namespace loom::kernels::cuda {

inline constexpr int kSgmvChunk = 512;    // h_in elements per shrink K split
inline constexpr int kSgmvRankTile = 16;  // ranks per shrink block (8 warps x 2)
inline constexpr int kSgmvTokenTile = 8;  // tokens per expand pass (v tile in smem)
inline constexpr int kSgmvMaxVStride = 1024;

inline int SgmvSplits(int h_in) { return (h_in + kSgmvChunk - 1) / kSgmvChunk; }

// Where segment s gets its tokens and adapter. Exactly one mode:
//   segs != nullptr: SGMV; segs[s] (device LoraSegment whose `lora` points to a device
//     LoraPair whose a/b are device BF16 arrays).
//   segs == nullptr: BGMV; segment s is token s alone, adapter loras[idx[s]] (device
//     LoraPair array), none when idx[s] < 0. REQUIRES idx[s] < the size of `loras`.
// A segment is skipped (nothing written) when it has no adapter, is empty, has rank <= 0
// or rank > v_stride, or lacks the weight the kernel reads (A for shrink, B for expand) —
// as ReferenceLoraOps does.
struct SgmvSegments {
  const LoraSegment* segs = nullptr;
  const int32_t* idx = nullptr;
  const LoraPair* loras = nullptr;
  int n_segs = 0;
};

// v[t, 0:rank_s) = x[t, :] · A_sᵀ. x: [>= max end, h_in]; v: [.., v_stride].
// partial: workspace [SgmvSplits(h_in), max_tokens, v_stride] floats (unused, may be
// null, when SgmvSplits(h_in) == 1). A segment whose end > max_tokens is not computed
// and sets *error_flag |= 1.
// REQUIRES (not checked here): h_in >= 1, 1 <= v_stride <= kSgmvMaxVStride,
// n_segs in [1, 65535], non-null x, v, error_flag.
cudaError_t LaunchSgmvShrink(const float* x, int h_in, const SgmvSegments& segs, float* v,
                             int v_stride, int max_tokens, float* partial, int* error_flag,
                             cudaStream_t stream);

// y[t, :] += scale_s · v[t, 0:rank_s) · B_sᵀ. y: [.., h_out].
// REQUIRES (not checked here): h_out >= 1, 1 <= v_stride <= kSgmvMaxVStride,
// n_segs in [1, 65535], non-null v, y.
cudaError_t LaunchSgmvExpand(const float* v, int v_stride, const SgmvSegments& segs,
                             int h_out, float* y, cudaStream_t stream);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_SGMV_LAUNCH_H_
