#include "kernels/cuda/cublas_gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/convert_launch.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"

namespace loom::kernels::cuda {

struct CublasGemm::Impl {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  int64_t max_elems = 0;
  DeviceBuffer<uint16_t> x16;
};

CublasGemm::CublasGemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CublasGemm::~CublasGemm() {
  if (impl_->handle != nullptr) cublasDestroy(impl_->handle);
}

absl::StatusOr<std::unique_ptr<CublasGemm>> CublasGemm::Create(int64_t max_elems,
                                                               CUstream_st* stream) {
  if (max_elems < 1) return absl::InvalidArgumentError("CublasGemm: max_elems < 1");
  if (absl::StatusOr<int> c = CudaDeviceCount(); !c.ok()) return c.status();
  auto impl = std::make_unique<Impl>();
  impl->stream = stream;
  impl->max_elems = max_elems;
  absl::StatusOr<DeviceBuffer<uint16_t>> buf = DeviceBuffer<uint16_t>::Allocate(max_elems);
  if (!buf.ok()) return buf.status();
  impl->x16 = std::move(*buf);
  const cublasStatus_t st = cublasCreate(&impl->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    impl->handle = nullptr;
    return absl::UnavailableError(absl::StrCat("cublasCreate: ", cublasGetStatusString(st)));
  }
  if (cublasSetStream(impl->handle, stream) != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError("cublasSetStream failed");
  }
  return std::unique_ptr<CublasGemm>(new CublasGemm(std::move(impl)));
}

absl::Status CublasGemm::MatMul(DType wtype, const uint16_t* w, int64_t rows, int64_t cols,
                                const float* x, int n, float* y) {
  if (wtype != DType::kF16 && wtype != DType::kBF16) {
    return absl::UnimplementedError("CublasGemm: weights must be F16 or BF16");
  }
  if (rows < 1 || cols < 1 || n < 0 || rows > INT32_MAX || cols > INT32_MAX ||
      static_cast<int64_t>(n) * cols > impl_->max_elems) {
    return absl::InvalidArgumentError(absl::StrCat("CublasGemm: bad shape rows=", rows,
                                                   " cols=", cols, " n=", n));
  }
  if (n == 0) return absl::OkStatus();
  if (w == nullptr || x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("CublasGemm: null pointer");
  }
  const bool bf16 = wtype == DType::kBF16;
  absl::Status st = CudaStatus(LaunchConvertF32(x, static_cast<int64_t>(n) * cols, bf16,
                                                impl_->x16.get(), impl_->stream),
                               "CublasGemm convert");
  if (!st.ok()) return st;
  const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major y[n, rows] = x[n, cols] W[rows, cols]^T is column-major
  // y^T[rows, n] = (W^T as col-major [cols, rows])^T · x^T (col-major [cols, n]).
  const cublasStatus_t cs = cublasGemmEx(
      impl_->handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), n,
      static_cast<int>(cols), &alpha, w, t, static_cast<int>(cols), impl_->x16.get(), t,
      static_cast<int>(cols), &beta, y, CUDA_R_32F, static_cast<int>(rows),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasGemmEx: ", cublasGetStatusString(cs)));
  }
  return absl::OkStatus();
}

}  // namespace loom::kernels::cuda
