// FP16 / BF16 GEMM for the unquantized path via cuBLAS (cublasGemmEx: tensor cores, FP32
// accumulation, FP32 output). Public header: no CUDA headers.
//
// y [n, rows] = x [n, cols] · Wᵀ with W [rows, cols] row-major FP16 or BF16 and x FP32,
// all DEVICE pointers. x is first rounded to W's type (into a workspace owned by the
// object), so results differ from the CPU backend (FP32 x times FP16 W) by that rounding:
// about 2^-11 (FP16) or 2^-8 (BF16) relative per product.
#ifndef LOOM_KERNELS_CUDA_CUBLAS_GEMM_H_
#define LOOM_KERNELS_CUDA_CUBLAS_GEMM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/dtype.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace loom::kernels::cuda {

class CublasGemm {
 public:
  // max_elems: the largest n * cols of a call (the converted-x workspace).
  // kUnavailable without a GPU (or when cublasCreate fails).
  static absl::StatusOr<std::unique_ptr<CublasGemm>> Create(int64_t max_elems,
                                                            CUstream_st* stream = nullptr);
  ~CublasGemm();

  // wtype: kF16 or kBF16 (else Unimplemented). InvalidArgument for bad shapes, null
  // pointers or n * cols > max_elems.
  absl::Status MatMul(DType wtype, const uint16_t* w, int64_t rows, int64_t cols,
                      const float* x, int n, float* y);

 private:
  struct Impl;
  explicit CublasGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_CUBLAS_GEMM_H_
