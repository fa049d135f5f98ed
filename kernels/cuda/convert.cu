#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/convert_launch.h"

namespace loom::kernels::cuda {
namespace {

__global__ void ConvertKernel(const float* x, int64_t count, bool bf16, uint16_t* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i]))
                  : __half_as_ushort(__float2half_rn(x[i]));
  }
}

}  // namespace

cudaError_t LaunchConvertF32(const float* x, int64_t count, bool bf16, uint16_t* out,
                             cudaStream_t stream) {
  int64_t blocks = (count + 255) / 256;
  if (blocks > 65535) blocks = 65535;
  ConvertKernel<<<static_cast<int>(blocks), 256, 0, stream>>>(x, count, bf16, out);
  return cudaGetLastError();
}

}  // namespace loom::kernels::cuda
