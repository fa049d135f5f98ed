// Conversion of CUDA runtime errors to absl::Status (host code only; include paths need
// CUDA_COPTS, see third_party/cuda/cuda.bzl).
#ifndef LOOM_KERNELS_CUDA_CUDA_STATUS_H_
#define LOOM_KERNELS_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace loom::kernels::cuda {

// OK for cudaSuccess; otherwise a Status whose message is
// "<what>: <cudaErrorName> (<code>): <cudaGetErrorString>" and whose code is
//   kUnavailable       for cudaErrorNoDevice / cudaErrorInsufficientDriver,
//   kInvalidArgument   for cudaErrorInvalidValue / cudaErrorInvalidDevicePointer,
//   kResourceExhausted for cudaErrorMemoryAllocation,
//   kInternal          for anything else.
absl::Status CudaStatus(cudaError_t err, absl::string_view what);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_CUDA_STATUS_H_
