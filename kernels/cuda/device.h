// CUDA device discovery. Safe to call on machines without a GPU or driver: never aborts.
// Public header: includes no CUDA headers.
#ifndef LOOM_KERNELS_CUDA_DEVICE_H_
#define LOOM_KERNELS_CUDA_DEVICE_H_

#include "absl/status/statusor.h"

namespace loom::kernels::cuda {

// Number of visible CUDA devices (>= 1) on success. Without a usable GPU returns
// kUnavailable naming the CUDA error (cudaErrorNoDevice, or cudaErrorInsufficientDriver
// when no driver is installed); any other runtime failure is kInternal.
absl::StatusOr<int> CudaDeviceCount();

// True iff CudaDeviceCount() succeeds with at least one device.
bool CudaAvailable();

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_DEVICE_H_
