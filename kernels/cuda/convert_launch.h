// Raw launcher of the FP32 -> FP16 / BF16 conversion kernel (convert.cu).
#ifndef LOOM_KERNELS_CUDA_CONVERT_LAUNCH_H_
#define LOOM_KERNELS_CUDA_CONVERT_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::kernels::cuda {

// out[i] = x[i] rounded to nearest even as FP16 (bf16 false) or BF16 (bf16 true).
cudaError_t LaunchConvertF32(const float* x, int64_t count, bool bf16, uint16_t* out,
                             cudaStream_t stream);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_CONVERT_LAUNCH_H_
