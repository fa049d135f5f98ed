#include "kernels/cuda/rms_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/rms_norm_launch.h"

namespace loom::kernels::cuda {

absl::Status RmsNorm(const float* x, const float* gamma, int n, int dim, float eps,
                     float* y, CUstream_st* stream) {
  if (n < 0 || dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RmsNorm: bad shape n=", n, " dim=", dim));
  }
  if (!(eps >= 0.0f) || !std::isfinite(eps)) {
    return absl::InvalidArgumentError(absl::StrCat("RmsNorm: bad eps ", eps));
  }
  if (n == 0) return absl::OkStatus();
  if (x == nullptr || gamma == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("RmsNorm: null pointer");
  }
  return CudaStatus(LaunchRmsNormF32(x, gamma, n, dim, eps, y, stream), "RmsNorm launch");
}

}  // namespace loom::kernels::cuda
