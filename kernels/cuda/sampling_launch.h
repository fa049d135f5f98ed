// Raw launcher of the device sampler (sampling.cu). Callers outside kernels/cuda use
// cuda_sampling.h.
#ifndef LOOM_KERNELS_CUDA_SAMPLING_LAUNCH_H_
#define LOOM_KERNELS_CUDA_SAMPLING_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::kernels::cuda {

// Per-row sampling parameters (device array). Same meaning as loom::SamplingOptions
// (models/sampling) minus the penalties; u is the row's uniform draw in [0, 1).
struct DeviceSampleParams {
  float temperature = 0.0f;  // 0: argmax (ties -> lowest id)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  double u = 0.0;
};

// ids[r] = the token sampled from logits [n, vocab] row r with params[r]. One block per
// row. REQUIRES (not checked here): n >= 1, vocab >= 1, device pointers.
cudaError_t LaunchSample(const float* logits, int n, int vocab,
                         const DeviceSampleParams* params, int32_t* ids, cudaStream_t stream);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_SAMPLING_LAUNCH_H_
