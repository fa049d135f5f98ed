// out[i] = sum over ranks in rank order of gathered[r][i]; one thread per element.
#include "parallel/rank_order_sum_launch.h"

namespace loom::parallel_cuda {
namespace {

__global__ void RankOrderSum(const float* __restrict__ g, int w, size_t n,
                             float* __restrict__ out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float acc = g[i];
    for (int r = 1; r < w; ++r) acc = __fadd_rn(acc, g[static_cast<size_t>(r) * n + i]);
    out[i] = acc;
  }
}

}  // namespace

cudaError_t LaunchRankOrderSum(const float* gathered, int world_size, size_t n, float* out,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535) blocks = 65535;
  RankOrderSum<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gathered, world_size,
                                                                        n, out);
  return cudaGetLastError();
}

}  // namespace loom::parallel_cuda
