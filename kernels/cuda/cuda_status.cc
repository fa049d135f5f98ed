#include "kernels/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace loom::kernels::cuda {

absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg =
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", static_cast<int>(err),
                   "): ", cudaGetErrorString(err));
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::UnavailableError(msg);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
      return absl::InvalidArgumentError(msg);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace loom::kernels::cuda
