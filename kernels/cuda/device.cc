#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_status.h"

namespace loom::kernels::cuda {

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;  // cudaGetDeviceCount leaves it untouched on failure.
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // Clear the error so later calls do not report it again.
    return CudaStatus(err, "cudaGetDeviceCount");
  }
  if (count <= 0) {
    return absl::UnavailableError("cudaGetDeviceCount: no CUDA devices visible");
  }
  return count;
}

bool CudaAvailable() {
  const absl::StatusOr<int> count = CudaDeviceCount();
  return count.ok() && *count > 0;
}

}  // namespace loom::kernels::cuda
