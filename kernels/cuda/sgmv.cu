// SGMV / BGMV kernels: BF16 LoRA weights, FP32 activations, CUDA cores (see
// sgmv_launch.h for the contract and the fixed summation order).
//
// shrink: grid (K splits, rank tiles, segments), 256 threads = 8 warps x 2 ranks. Each
//   warp keeps its two A-row slices (2 x 16 values per lane) in registers and streams the
//   segment's tokens, so A is read once per segment. With more than one split, each
//   block writes its partial dot products to the workspace and a second kernel (grid:
//   segments) adds the splits in order: deterministic, unlike atomics.
// expand: grid (h_out tiles of 256, segments); thread o keeps an accumulator per token of
//   an 8-token tile whose v rows sit in shared memory, and reads its B row (rank BF16,
//   contiguous across the warp) once per tile.
#include <cstdint>

#include "kernels/cuda/sgmv_launch.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kShrinkThreads = 256;
constexpr int kExpandThreads = 256;
constexpr int kLaneElems = 16;  // x / A elements per lane per split (2 x 8)

struct Seg {
  int begin = 0;
  int end = 0;
  const uint16_t* a = nullptr;
  const uint16_t* b = nullptr;
  int rank = 0;
  float scale = 0.0f;
};

// Resolves segment s; false when it is skipped (see SgmvSegments).
__device__ __forceinline__ bool LoadSeg(const SgmvSegments& m, int s, int v_stride,
                                        bool need_a, Seg* out) {
  const LoraPair* p = nullptr;
  if (m.segs != nullptr) {
    const LoraSegment sg = m.segs[s];
    out->begin = sg.begin;
    out->end = sg.end;
    p = sg.lora;
  } else {
    out->begin = s;
    out->end = s + 1;
    const int32_t i = m.idx[s];
    p = i >= 0 ? m.loras + i : nullptr;
  }
  if (p == nullptr || out->begin < 0 || out->begin >= out->end) return false;
  const LoraPair lp = *p;
  if (lp.rank <= 0 || lp.rank > v_stride) return false;
  if ((need_a ? lp.a : lp.b) == nullptr) return false;
  out->a = lp.a;
  out->b = lp.b;
  out->rank = lp.rank;
  out->scale = lp.scale;
  return true;
}

__device__ __forceinline__ float Bf16ToF32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// out[0..16) = the lane's 16 BF16 values of `row` (zeros past n): elements base + j and
// base + 256 + j, j < 8. vec: 16-byte loads allowed (n % 8 == 0, row 16-byte aligned).
__device__ __forceinline__ void LoadBf16Slice(const uint16_t* row, int base, int n, bool vec,
                                              float* out) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int k = base + h * 256;
    if (vec && k + 8 <= n) {
      const uint4 u = *reinterpret_cast<const uint4*>(row + k);
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[h * 8 + 2 * j] = __uint_as_float(w[j] << 16);
        out[h * 8 + 2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) out[h * 8 + j] = k + j < n ? Bf16ToF32(row[k + j]) : 0.0f;
    }
  }
}

__device__ __forceinline__ void LoadF32Slice(const float* row, int base, int n, bool vec,
                                             float* out) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int k = base + h * 256;
    if (vec && k + 8 <= n) {
      const float4 u = *reinterpret_cast<const float4*>(row + k);
      const float4 w = *reinterpret_cast<const float4*>(row + k + 4);
      out[h * 8 + 0] = u.x; out[h * 8 + 1] = u.y; out[h * 8 + 2] = u.z; out[h * 8 + 3] = u.w;
      out[h * 8 + 4] = w.x; out[h * 8 + 5] = w.y; out[h * 8 + 6] = w.z; out[h * 8 + 7] = w.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) out[h * 8 + j] = k + j < n ? row[k + j] : 0.0f;
    }
  }
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__global__ void __launch_bounds__(kShrinkThreads)
    ShrinkKernel(const float* __restrict__ x, int h_in, SgmvSegments m, float* v,
                 int v_stride, int max_tokens, float* partial, int* error_flag) {
  Seg sg;
  if (!LoadSeg(m, blockIdx.z, v_stride, /*need_a=*/true, &sg)) return;
  if (sg.end > max_tokens) {
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) atomicOr(error_flag, 1);
    return;
  }
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int r0 = blockIdx.y * kSgmvRankTile + warp * 2;
  if (r0 >= sg.rank) return;  // no block-level barrier below: early exit is safe
  const bool has_r1 = r0 + 1 < sg.rank;
  const int split = blockIdx.x;
  const int base = split * kSgmvChunk + lane * 8;
  const bool a_vec = h_in % 8 == 0 && Aligned16(sg.a);
  const bool x_vec = h_in % 8 == 0 && Aligned16(x);

  float a0[kLaneElems], a1[kLaneElems];
  LoadBf16Slice(sg.a + static_cast<int64_t>(r0) * h_in, base, h_in, a_vec, a0);
  if (has_r1) {
    LoadBf16Slice(sg.a + static_cast<int64_t>(r0 + 1) * h_in, base, h_in, a_vec, a1);
  } else {
#pragma unroll
    for (int j = 0; j < kLaneElems; ++j) a1[j] = 0.0f;
  }
  const bool direct = gridDim.x == 1;
  for (int t = sg.begin; t < sg.end; ++t) {
    float xs[kLaneElems];
    LoadF32Slice(x + static_cast<int64_t>(t) * h_in, base, h_in, x_vec, xs);
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int j = 0; j < kLaneElems; ++j) {
      s0 = fmaf(xs[j], a0[j], s0);
      s1 = fmaf(xs[j], a1[j], s1);
    }
    s0 = WarpSum(s0);
    s1 = WarpSum(s1);
    if (lane == 0) {
      float* dst = direct ? v + static_cast<int64_t>(t) * v_stride
                          : partial + (static_cast<int64_t>(split) * max_tokens + t) * v_stride;
      dst[r0] = s0;
      if (has_r1) dst[r0 + 1] = s1;
    }
  }
}

// v[t, r] = Σ_split partial[split, t, r], splits in order; grid: segments.
__global__ void ShrinkReduceKernel(SgmvSegments m, int splits, const float* partial,
                                   int max_tokens, float* v, int v_stride) {
  Seg sg;
  if (!LoadSeg(m, blockIdx.x, v_stride, /*need_a=*/true, &sg)) return;
  if (sg.end > max_tokens) return;  // flagged by the shrink kernel
  const int n = (sg.end - sg.begin) * sg.rank;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int t = sg.begin + i / sg.rank;
    const int r = i % sg.rank;
    float acc = 0.0f;
    for (int s = 0; s < splits; ++s) {
      acc += partial[(static_cast<int64_t>(s) * max_tokens + t) * v_stride + r];
    }
    v[static_cast<int64_t>(t) * v_stride + r] = acc;
  }
}

__global__ void __launch_bounds__(kExpandThreads)
    ExpandKernel(const float* __restrict__ v, int v_stride, SgmvSegments m, int h_out,
                 float* y) {
  extern __shared__ float v_tile[];  // [kSgmvTokenTile][rank]
  Seg sg;
  if (!LoadSeg(m, blockIdx.y, v_stride, /*need_a=*/false, &sg)) return;  // uniform
  const int o = blockIdx.x * kExpandThreads + threadIdx.x;
  const int rank = sg.rank;
  const uint16_t* brow = sg.b + static_cast<int64_t>(o < h_out ? o : 0) * rank;
  const bool b_vec = rank % 8 == 0 && Aligned16(sg.b);
  for (int t0 = sg.begin; t0 < sg.end; t0 += kSgmvTokenTile) {
    const int nt = min(kSgmvTokenTile, sg.end - t0);
    __syncthreads();  // previous tile fully consumed
    for (int i = threadIdx.x; i < nt * rank; i += kExpandThreads) {
      v_tile[i] = v[static_cast<int64_t>(t0 + i / rank) * v_stride + i % rank];
    }
    __syncthreads();
    if (o >= h_out) continue;
    float acc[kSgmvTokenTile];
#pragma unroll
    for (int j = 0; j < kSgmvTokenTile; ++j) acc[j] = 0.0f;
    if (b_vec) {
      for (int r = 0; r < rank; r += 8) {
        const uint4 u = *reinterpret_cast<const uint4*>(brow + r);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const float b = __uint_as_float(q % 2 == 0 ? w[q / 2] << 16 : w[q / 2] & 0xFFFF0000u);
#pragma unroll
          for (int j = 0; j < kSgmvTokenTile; ++j) {
            if (j < nt) acc[j] = fmaf(v_tile[j * rank + r + q], b, acc[j]);
          }
        }
      }
    } else {
      for (int r = 0; r < rank; ++r) {
        const float b = Bf16ToF32(brow[r]);
#pragma unroll
        for (int j = 0; j < kSgmvTokenTile; ++j) {
          if (j < nt) acc[j] = fmaf(v_tile[j * rank + r], b, acc[j]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kSgmvTokenTile; ++j) {
      if (j < nt) {
        float* dst = y + static_cast<int64_t>(t0 + j) * h_out + o;
        *dst = *dst + sg.scale * acc[j];
      }
    }
  }
}

}  // namespace

cudaError_t LaunchSgmvShrink(const float* x, int h_in, const SgmvSegments& segs, float* v,
                             int v_stride, int max_tokens, float* partial, int* error_flag,
                             cudaStream_t stream) {
  const int splits = SgmvSplits(h_in);
  const dim3 grid(splits, (v_stride + kSgmvRankTile - 1) / kSgmvRankTile, segs.n_segs);
  ShrinkKernel<<<grid, kShrinkThreads, 0, stream>>>(x, h_in, segs, v, v_stride, max_tokens,
                                                    partial, error_flag);
  if (splits > 1) {
    ShrinkReduceKernel<<<segs.n_segs, 128, 0, stream>>>(segs, splits, partial, max_tokens, v,
                                                        v_stride);
  }
  return cudaGetLastError();
}

cudaError_t LaunchSgmvExpand(const float* v, int v_stride, const SgmvSegments& segs,
                             int h_out, float* y, cudaStream_t stream) {
  const dim3 grid((h_out + kExpandThreads - 1) / kExpandThreads, segs.n_segs);
  const size_t smem = sizeof(float) * kSgmvTokenTile * v_stride;
  ExpandKernel<<<grid, kExpandThreads, smem, stream>>>(v, v_stride, segs, h_out, y);
  return cudaGetLastError();
}

}  // namespace loom::kernels::cuda
