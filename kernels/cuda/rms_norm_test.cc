#include "kernels/cuda/rms_norm.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/gpu_test_util.h"

namespace loom::kernels::cuda {
namespace {

using gpu_testing::DeviceFloats;

// Scalar reference in double: y = x / sqrt(mean(x^2) + eps) * gamma, per row.
std::vector<float> ReferenceRmsNorm(const std::vector<float>& x,
                                    const std::vector<float>& gamma, int n, int dim,
                                    float eps) {
  std::vector<float> y(static_cast<size_t>(n) * dim);
  for (int r = 0; r < n; ++r) {
    const float* xr = x.data() + static_cast<size_t>(r) * dim;
    double sum_sq = 0.0;
    for (int i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(sum_sq / dim + static_cast<double>(eps));
    for (int i = 0; i < dim; ++i) {
      y[static_cast<size_t>(r) * dim + i] = static_cast<float>(xr[i] * inv * gamma[i]);
    }
  }
  return y;
}

std::vector<float> RandomVector(size_t count, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& f : v) f = dist(rng);
  return v;
}

// Number of elements whose relative error exceeds 1e-5 (zeros must match exactly).
int CountMismatches(const std::vector<float>& got, const std::vector<float>& want) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-5f * std::fabs(want[i]))) ++bad;
  }
  return bad;
}

TEST(CudaRmsNormTest, RejectsBadArgumentsBeforeTouchingTheDevice) {
  float dummy = 0.0f;  // never dereferenced: validation fails first
  float* p = &dummy;
  EXPECT_EQ(RmsNorm(p, p, -1, 64, 1e-5f, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(p, p, 1, 0, 1e-5f, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(p, p, 1, 64, -1e-5f, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(p, p, 1, 64, NAN, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(nullptr, p, 1, 64, 1e-5f, p).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(p, nullptr, 1, 64, 1e-5f, p).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(p, p, 1, 64, 1e-5f, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaRmsNormTest, ZeroRowsIsANoOp) {
  EXPECT_TRUE(RmsNorm(nullptr, nullptr, 0, 64, 1e-5f, nullptr).ok());
}

// Vectorised (dim % 4 == 0) and scalar (odd dims) paths, rows 1..37.
TEST(CudaRmsNormTest, MatchesScalarReferenceOverShapes) {
  LOOM_SKIP_WITHOUT_GPU();
  constexpr int kMaxRows = 37;
  for (int dim : {64, 576, 4096, 5120, 8192, 1, 33, 575}) {
    const std::vector<float> x = RandomVector(size_t{kMaxRows} * dim, -2.0f, 2.0f, dim);
    const std::vector<float> gamma = RandomVector(dim, 0.25f, 1.75f, dim + 1);
    DeviceFloats dx(x.size()), dg(gamma.size()), dy(x.size());
    ASSERT_TRUE(dx.ok() && dg.ok() && dy.ok());
    dx.CopyFrom(x);
    dg.CopyFrom(gamma);
    for (int rows = 1; rows <= kMaxRows; ++rows) {
      SCOPED_TRACE(::testing::Message() << "dim=" << dim << " rows=" << rows);
      ASSERT_TRUE(RmsNorm(dx.get(), dg.get(), rows, dim, 1e-5f, dy.get()).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> got;
      dy.CopyTo(&got, size_t(rows) * dim);
      const std::vector<float> want = ReferenceRmsNorm(
          std::vector<float>(x.begin(), x.begin() + size_t(rows) * dim), gamma, rows,
          dim, 1e-5f);
      EXPECT_EQ(CountMismatches(got, want), 0);
    }
  }
}

TEST(CudaRmsNormTest, InPlaceZeroRowAndLargeEps) {
  LOOM_SKIP_WITHOUT_GPU();
  const int n = 5, dim = 576;
  std::vector<float> x = RandomVector(size_t(n) * dim, -3.0f, 3.0f, 7);
  std::fill(x.begin() + dim, x.begin() + 2 * dim, 0.0f);  // row 1 all zeros -> zeros
  const std::vector<float> gamma = RandomVector(dim, -1.0f, 1.0f, 8);
  for (float eps : {1e-6f, 0.5f}) {
    DeviceFloats dx(x.size()), dg(gamma.size());
    ASSERT_TRUE(dx.ok() && dg.ok());
    dx.CopyFrom(x);
    dg.CopyFrom(gamma);
    ASSERT_TRUE(RmsNorm(dx.get(), dg.get(), n, dim, eps, dx.get()).ok());
    std::vector<float> got;
    dx.CopyTo(&got, x.size());
    EXPECT_EQ(CountMismatches(got, ReferenceRmsNorm(x, gamma, n, dim, eps)), 0)
        << "eps=" << eps;
  }
}

// Pointers off 16-byte alignment must take the scalar path and stay correct.
TEST(CudaRmsNormTest, UnalignedPointersOnAStream) {
  LOOM_SKIP_WITHOUT_GPU();
  const int n = 3, dim = 4096;
  const std::vector<float> x = RandomVector(size_t(n) * dim, -1.0f, 1.0f, 11);
  const std::vector<float> gamma = RandomVector(dim, 0.5f, 1.5f, 12);
  std::vector<float> x_padded(x.size() + 1, 0.0f);
  std::copy(x.begin(), x.end(), x_padded.begin() + 1);
  DeviceFloats dx(x_padded.size()), dg(gamma.size()), dy(x.size() + 1);
  ASSERT_TRUE(dx.ok() && dg.ok() && dy.ok());
  dx.CopyFrom(x_padded);
  dg.CopyFrom(gamma);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_TRUE(RmsNorm(dx.get() + 1, dg.get(), n, dim, 1e-5f, dy.get() + 1, stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  std::vector<float> got;
  dy.CopyTo(&got, x.size() + 1);
  got.erase(got.begin());
  EXPECT_EQ(CountMismatches(got, ReferenceRmsNorm(x, gamma, n, dim, 1e-5f)), 0);
}

}  // namespace
}  // namespace loom::kernels::cuda
