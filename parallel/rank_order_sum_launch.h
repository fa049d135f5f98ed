// Raw launcher of the rank-order sum kernel (nvcc side of NcclCommunicator's deterministic
// AllReduceSum). Callers use parallel/nccl_communicator.h.
#ifndef LOOM_PARALLEL_RANK_ORDER_SUM_LAUNCH_H_
#define LOOM_PARALLEL_RANK_ORDER_SUM_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace loom::parallel_cuda {

// Queues out[i] = ((g[0][i] + g[1][i]) + g[2][i]) + ... + g[W-1][i] for i < n on `stream`
// (plain FP32 adds in rank order, no FMA, so every rank gets bitwise the same sum).
// gathered: device [world_size][n]; out: device [n] (may not alias gathered).
// Returns the launch error (cudaSuccess once queued).
cudaError_t LaunchRankOrderSum(const float* gathered, int world_size, size_t n, float* out,
                               cudaStream_t stream);

}  // namespace loom::parallel_cuda

#endif  // LOOM_PARALLEL_RANK_ORDER_SUM_LAUNCH_H_
