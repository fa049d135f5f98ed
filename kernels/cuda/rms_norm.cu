// RMSNorm, FP32: one thread block per row, warp-shuffle block reduction.
#include <cstdint>

#include "kernels/cuda/rms_norm_launch.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 512;

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sum of `v` over the block, returned to every thread. REQUIRES: blockDim.x is a
// multiple of 32 and at most 1024.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float warp_sums[kWarp];
  __shared__ float total;
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  v = WarpSum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int n_warps = blockDim.x / kWarp;
    v = lane < n_warps ? warp_sums[lane] : 0.0f;
    v = WarpSum(v);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

// kVec = 4: float4 accesses (dim % 4 == 0, 16-byte aligned pointers); kVec = 1: scalar.
// y may alias x: every element is read (twice) and written by the same thread, and all
// first-pass reads finish before the block barrier in BlockSum.
template <int kVec>
__global__ void RmsNormKernel(const float* x, const float* __restrict__ gamma, int dim,
                              float eps, float* y) {
  const int64_t row_offset = static_cast<int64_t>(blockIdx.x) * dim;
  const float* xr = x + row_offset;
  float* yr = y + row_offset;
  float sum_sq = 0.0f;
  if constexpr (kVec == 4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int i = threadIdx.x; i < dim / 4; i += blockDim.x) {
      const float4 v = x4[i];
      sum_sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) sum_sq += xr[i] * xr[i];
  }
  sum_sq = BlockSum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
  if constexpr (kVec == 4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (int i = threadIdx.x; i < dim / 4; i += blockDim.x) {
      const float4 v = x4[i];
      const float4 g = g4[i];
      y4[i] = make_float4(v.x * inv_rms * g.x, v.y * inv_rms * g.y, v.z * inv_rms * g.z,
                          v.w * inv_rms * g.w);
    }
  } else {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * inv_rms * gamma[i];
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t LaunchRmsNormF32(const float* x, const float* gamma, int n, int dim, float eps,
                             float* y, cudaStream_t stream) {
  const bool vec4 = dim % 4 == 0 && Aligned16(x) && Aligned16(y) && Aligned16(gamma);
  const int units = vec4 ? dim / 4 : dim;  // elements each thread-iteration handles
  int threads = (units + kWarp - 1) / kWarp * kWarp;
  if (threads > kMaxThreads) threads = kMaxThreads;
  if (vec4) {
    RmsNormKernel<4><<<n, threads, 0, stream>>>(x, gamma, dim, eps, y);
  } else {
    RmsNormKernel<1><<<n, threads, 0, stream>>>(x, gamma, dim, eps, y);
  }
  return cudaGetLastError();
}

}  // namespace loom::kernels::cuda
