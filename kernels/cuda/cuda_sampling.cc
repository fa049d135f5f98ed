#include "kernels/cuda/cuda_sampling.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampling_launch.h"

namespace loom::kernels::cuda {

static_assert(sizeof(RowSampling) == sizeof(DeviceSampleParams),
              "RowSampling must match the kernel's parameter layout");
static_assert(offsetof(RowSampling, u) == offsetof(DeviceSampleParams, u));

absl::Status RowSamplingValid(const RowSampling& p) {
  if (!(p.temperature >= 0.0f && p.temperature <= 100.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("temperature ", p.temperature));
  }
  if (p.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k ", p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p ", p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("min_p ", p.min_p));
  }
  if (!(p.u >= 0.0 && p.u < 1.0)) return absl::InvalidArgumentError(absl::StrCat("u ", p.u));
  return absl::OkStatus();
}

absl::Status SampleTokens(const float* logits, int n, int vocab, const RowSampling* params,
                          int32_t* ids, CUstream_st* stream) {
  if (n < 0 || vocab < 1) {
    return absl::InvalidArgumentError(absl::StrCat("SampleTokens: n=", n, " vocab=", vocab));
  }
  if (n == 0) return absl::OkStatus();
  if (logits == nullptr || params == nullptr || ids == nullptr) {
    return absl::InvalidArgumentError("SampleTokens: null pointer");
  }
  return CudaStatus(LaunchSample(logits, n, vocab,
                                 reinterpret_cast<const DeviceSampleParams*>(params), ids,
                                 stream),
                    "SampleTokens launch");
}

}  // namespace loom::kernels::cuda
