// Raw launcher of the RMSNorm CUDA kernel, shared by rms_norm.cu (nvcc) and rms_norm.cc
// (gcc). Callers outside kernels/cuda use rms_norm.h instead.
#ifndef LOOM_KERNELS_CUDA_RMS_NORM_LAUNCH_H_
#define LOOM_KERNELS_CUDA_RMS_NORM_LAUNCH_H_

#include <cuda_runtime_api.h>

namespace loom::kernels::cuda {

// Queues y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * gamma for r < n on `stream`.
// x, y: device [n, dim] row-major FP32 (y may alias x); gamma: device [dim].
// One block per row. Uses float4 accesses when dim % 4 == 0 and x, y, gamma are 16-byte
// aligned, scalar accesses otherwise.
// REQUIRES (not checked here): n >= 1, dim >= 1, non-null pointers.
// Returns the launch error (cudaSuccess once queued); execution errors surface later.
cudaError_t LaunchRmsNormF32(const float* x, const float* gamma, int n, int dim, float eps,
                             float* y, cudaStream_t stream);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_RMS_NORM_LAUNCH_H_
