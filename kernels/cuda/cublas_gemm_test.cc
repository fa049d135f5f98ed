// CublasGemm (FP16 / BF16 weights) vs the CPU ReferenceBackend's MatMul over the same
// weights, with the activations rounded to the weight type first (as the GPU path does):
// then both compute the same products and differ only by accumulation order.
#include "kernels/cuda/cublas_gemm.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/reference_backend.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/dtype.h"

namespace loom::kernels::cuda {
namespace {

TEST(CublasGemmTest, CreateMatchesDevicePresence) {
  absl::StatusOr<std::unique_ptr<CublasGemm>> g = CublasGemm::Create(1024);
  if (gpu_testing::GpuPresent()) {
    EXPECT_TRUE(g.ok()) << g.status();
  } else {
    EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable) << g.status();
  }
  EXPECT_EQ(CublasGemm::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CublasGemmTest, MatchesReferenceMatMul) {
  LOOM_SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> ref = CreateReferenceBackend();
  absl::StatusOr<std::unique_ptr<CublasGemm>> gemm = CublasGemm::Create(64 * 1536);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (DType dt : {DType::kF16, DType::kBF16}) {
    for (int cols : {576, 1536}) {
      const int rows = 200;
      for (int n : {1, 13, 64}) {
        SCOPED_TRACE(std::string(DTypeName(dt)) + " cols=" + std::to_string(cols) +
                     " n=" + std::to_string(n));
        std::vector<uint16_t> w(size_t(rows) * cols);
        for (uint16_t& h : w) h = dt == DType::kF16 ? Fp32ToFp16(u(rng)) : Fp32ToBf16(u(rng));
        std::vector<float> x(size_t(n) * cols), x_rounded(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          x[i] = u(rng);
          x_rounded[i] = dt == DType::kF16 ? Fp16ToFp32(Fp32ToFp16(x[i]))
                                           : Bf16ToFp32(Fp32ToBf16(x[i]));
        }
        WeightMatrix wm{dt, rows, cols, reinterpret_cast<const uint8_t*>(w.data()),
                        size_t(cols) * 2};
        ActivationPack pack;
        ref->PackActivations(dt, x_rounded.data(), n, cols, &pack);
        std::vector<float> want(size_t(n) * rows);
        ref->MatMul(wm, pack, want.data());

        auto dw = DeviceBuffer<uint16_t>::FromHost(w);
        auto dx = DeviceBuffer<float>::FromHost(x);
        auto dy = DeviceBuffer<float>::Allocate(want.size());
        ASSERT_TRUE(dw.ok() && dx.ok() && dy.ok());
        ASSERT_TRUE((*gemm)->MatMul(dt, dw->get(), rows, cols, dx->get(), n, dy->get()).ok());
        const std::vector<float> got = *dy->ToHost();
        int bad = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          // FP32 accumulation of `cols` exact products of magnitude <= 1.
          if (!(std::fabs(got[i] - want[i]) <= 1e-6f * cols) && ++bad <= 3) {
            ADD_FAILURE() << "y[" << i << "] got " << got[i] << " want " << want[i];
          }
        }
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

}  // namespace
}  // namespace loom::kernels::cuda
