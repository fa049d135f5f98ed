// RMSNorm on a CUDA device (FP32). Public header: includes no CUDA headers.
#ifndef LOOM_KERNELS_CUDA_RMS_NORM_H_
#define LOOM_KERNELS_CUDA_RMS_NORM_H_

#include "absl/status/status.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace loom::kernels::cuda {

// Queues y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * gamma for each row r < n on
// `stream` (nullptr: the default stream); same contract as Backend::RmsNorm.
// x, y: device pointers to [n, dim] row-major floats (y may alias x); gamma: device [dim].
// n == 0 is a no-op. Returns kInvalidArgument for n < 0, dim <= 0, a null pointer or a
// negative / non-finite eps (checked before any CUDA call), else the launch status
// (kernel execution errors surface at the next synchronisation).
absl::Status RmsNorm(const float* x, const float* gamma, int n, int dim, float eps,
                     float* y, CUstream_st* stream = nullptr);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_RMS_NORM_H_
