// CpuBackend (every ISA level this CPU supports) against ReferenceBackend, plus the
// batch-invariance contract of backend.h.
//
// Tolerance for MatMul: |y - y_ref| <= 1e-5 * S, where S = sum over the dot's terms of
// their absolute values (per block |d_w d_x isum| + |m_w s_x| for quantized weights,
// sum_j |w_j x_j| for float weights). The reference accumulates in double; the optimised
// kernels round each block term and each fp32 accumulation to float, so their error is
// bounded by ~(blocks + 8) * 2^-24 * S, below 1e-5 * S for every shape tested here.
#include "kernels/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reference_backend.h"
#include "kernels/cpu/reference_kernels.h"
#include "kernels/cpu/test_util.h"

namespace loom::kernels {
namespace {

using testing::RandomFloats;
using testing::RandomMatrix;

std::vector<CpuIsa> SupportedIsas() {
  std::vector<CpuIsa> v;
  for (CpuIsa i : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (CpuSupports(i)) v.push_back(i);
  }
  return v;
}

std::string Label(CpuIsa isa, DType t, int64_t rows, int64_t cols, int n, int threads) {
  return std::string(CpuIsaName(isa)) + " " + std::string(DTypeName(t)) + " " +
         std::to_string(rows) + "x" + std::to_string(cols) + " n=" + std::to_string(n) +
         " threads=" + std::to_string(threads);
}

TEST(CpuBackendTest, CreatesBestIsa) {
  auto be = CreateCpuBackend(0);
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->name(), "cpu-" + std::string(CpuIsaName(BestCpuIsa())));
  EXPECT_EQ(CreateCpuBackendWithIsa(1, CpuIsa::kAvx512Vnni) != nullptr,
            CpuSupports(CpuIsa::kAvx512Vnni));
}

// PackActivations must produce exactly QuantizeRowQ8's integers and scales.
TEST(CpuBackendTest, PackActivationsIsBitwiseQuantizeRowQ8) {
  const int n = 37, k = 1024;
  auto x = RandomFloats(static_cast<size_t>(n) * k, 3, 4.0f);
  // Exact ties: a block with amax 127 has d = 1, so x = j + 0.5 are ties.
  for (int j = 0; j < 32; ++j) x[j] = (j == 0) ? 127.0f : (j % 2 ? 1 : -1) * (j / 2 + 0.5f);
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;  // zero block
  for (int j = 64; j < 96; ++j) x[j] = 1e-30f * (j - 80);  // tiny values
  ActivationPack want;
  CreateReferenceBackend()->PackActivations(DType::kQ4_1, x.data(), n, k, &want);
  for (CpuIsa isa : SupportedIsas()) {
    for (int threads : {1, 2}) {
      auto be = CreateCpuBackendWithIsa(threads, isa);
      ActivationPack got;
      be->PackActivations(DType::kQ8_0, x.data(), n, k, &got);
      ASSERT_TRUE(got.quantized);
      ASSERT_EQ(got.n, n);
      ASSERT_EQ(got.k, k);
      ASSERT_EQ(0, std::memcmp(got.q8.data(), want.q8.data(), sizeof(BlockQ8Act) * n * k / 32))
          << CpuIsaName(isa);
      ActivationPack f;
      be->PackActivations(DType::kBF16, x.data(), n, k, &f);
      EXPECT_FALSE(f.quantized);
      EXPECT_EQ(0, std::memcmp(f.f32.data(), x.data(), sizeof(float) * n * k));
    }
  }
}

// Reference values and error scales of y = x W^T for the first n rows of x.
struct RefResult {
  std::vector<float> y;
  std::vector<double> scale;
};
RefResult Reference(const WeightMatrix& w, const std::vector<float>& x, int n) {
  auto ref = CreateReferenceBackend();
  ActivationPack pack;
  ref->PackActivations(w.dtype, x.data(), n, w.cols, &pack);
  RefResult r;
  r.y.resize(static_cast<size_t>(n) * w.rows);
  r.scale.resize(r.y.size());
  ref->MatMul(w, pack, r.y.data());
  const int nb = w.cols / 32;
  for (int i = 0; i < n; ++i) {
    for (int64_t j = 0; j < w.rows; ++j) {
      const uint8_t* row = w.data + j * w.row_bytes;
      if (pack.quantized) {
        ref::DotQ8(w.dtype, row, pack.q8.data() + i * nb, nb, &r.scale[i * w.rows + j]);
      } else {
        ref::DotFloat(w.dtype, row, pack.f32.data() + i * w.cols, w.cols,
                      &r.scale[i * w.rows + j]);
      }
    }
  }
  return r;
}

void CheckMatMul(const WeightMatrix& w, const std::vector<float>& x, const RefResult& want,
                 const std::vector<int>& ns, const std::vector<int>& thread_counts) {
  for (CpuIsa isa : SupportedIsas()) {
    for (int threads : thread_counts) {
      auto be = CreateCpuBackendWithIsa(threads, isa);
      ActivationPack pack;
      for (int n : ns) {
        be->PackActivations(w.dtype, x.data(), n, w.cols, &pack);
        std::vector<float> y(static_cast<size_t>(n) * w.rows, NAN);
        be->MatMul(w, pack, y.data());
        int bad = 0;
        for (size_t i = 0; i < y.size() && bad < 5; ++i) {
          if (!(std::fabs(y[i] - want.y[i]) <= 1e-5 * want.scale[i] + 1e-30)) {
            ++bad;
            ADD_FAILURE() << Label(isa, w.dtype, w.rows, w.cols, n, threads) << " at " << i
                          << ": " << y[i] << " vs " << want.y[i] << " scale " << want.scale[i];
          }
        }
      }
    }
  }
}

TEST(CpuBackendTest, MatMulMatchesReferenceAllRowCounts) {
  std::vector<int> ns;
  for (int n = 1; n <= 33; ++n) ns.push_back(n);
  ns.push_back(64);
  for (DType t : testing::kAllDTypes) {
    auto m = RandomMatrix(t, 192, 576, 21);
    const auto x = RandomFloats(64 * 576, 22);
    CheckMatMul(m.w, x, Reference(m.w, x, 64), ns, {1, 2, 3});
  }
}

TEST(CpuBackendTest, MatMulMatchesReferenceSmolLm2Shapes) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {576, 576}, {1536, 576}, {576, 1536}, {7, 64}, {5, 96}};
  for (auto [rows, cols] : shapes) {
    for (DType t : testing::kAllDTypes) {
      auto m = RandomMatrix(t, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
      const auto x = RandomFloats(33 * cols, 23);
      CheckMatMul(m.w, x, Reference(m.w, x, 33), {1, 3, 8, 33}, {1, 2, 3});
    }
  }
}

TEST(CpuBackendTest, MatMulFloatWeightsWithOddK) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    auto m = RandomMatrix(t, 13, 75, 31);
    const auto x = RandomFloats(9 * 75, 32);
    CheckMatMul(m.w, x, Reference(m.w, x, 9), {1, 2, 5, 9}, {1, 2});
  }
}

TEST(CpuBackendTest, MatMulOutputEmbeddingShape) {
  for (DType t : {DType::kQ8_0, DType::kQ4_1}) {
    auto m = RandomMatrix(t, 49152, 576, 41);
    const auto x = RandomFloats(4 * 576, 42);
    CheckMatMul(m.w, x, Reference(m.w, x, 4), {1, 4}, {2});
  }
}

// Batch invariance: rows of an n-row MatMul equal the same rows computed alone, bitwise,
// for any thread count (and AVX2 == AVX-512 VNNI for MatMul). {37, 4096}: the x86
// multi-row path splits 33 activation rows over several scale super-groups and the odd
// row count over 4-row packed sub-chunks.
TEST(CpuBackendTest, MatMulIsBatchAndThreadInvariant) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{192, 576}, {70, 1536}, {37, 4096}};
  for (auto [rows, cols] : shapes) {
    for (DType t : testing::kAllDTypes) {
      auto m = RandomMatrix(t, rows, cols, 51);
      const auto x = RandomFloats(33 * cols, 52);
      std::vector<float> alone(33 * rows);
      {
        auto be1 = CreateCpuBackendWithIsa(1, BestCpuIsa());
        ActivationPack p;
        for (int i = 0; i < 33; ++i) {
          be1->PackActivations(t, x.data() + i * cols, 1, cols, &p);
          be1->MatMul(m.w, p, alone.data() + i * rows);
        }
      }
      for (CpuIsa isa : SupportedIsas()) {
        const bool same_kernels = isa == BestCpuIsa() || (isa != CpuIsa::kScalar &&
                                                          BestCpuIsa() != CpuIsa::kScalar);
        if (!same_kernels) continue;
        for (int threads : {1, 2, 3}) {
          auto be = CreateCpuBackendWithIsa(threads, isa);
          ActivationPack p;
          for (int n : {1, 2, 3, 5, 8, 16, 32, 33}) {
            // Rows start at an offset so that each row also appears at a new position.
            const int off = n == 33 ? 0 : 33 - n;
            be->PackActivations(t, x.data() + off * cols, n, cols, &p);
            std::vector<float> y(n * rows);
            be->MatMul(m.w, p, y.data());
            ASSERT_EQ(0, std::memcmp(y.data(), alone.data() + off * rows,
                                     sizeof(float) * n * rows))
                << Label(isa, t, rows, cols, n, threads);
          }
        }
      }
    }
  }
}

TEST(CpuBackendTest, RmsNormMatchesReferenceAndIsRowInvariant) {
  auto ref = CreateReferenceBackend();
  for (int dim : {576, 75, 8}) {
    const int n = 80;  // n * 576 crosses the parallel threshold
    const auto x = RandomFloats(n * dim, 61, 3.0f);
    const auto g = RandomFloats(dim, 62);
    std::vector<float> want(n * dim);
    ref->RmsNorm(x.data(), g.data(), n, dim, 1e-5f, want.data());
    for (CpuIsa isa : SupportedIsas()) {
      for (int threads : {1, 3}) {
        auto be = CreateCpuBackendWithIsa(threads, isa);
        std::vector<float> y = x;  // in place (y aliases x)
        be->RmsNorm(y.data(), g.data(), n, dim, 1e-5f, y.data());
        for (int i = 0; i < n * dim; ++i) {
          ASSERT_NEAR(y[i], want[i], 1e-5 * (std::fabs(want[i]) + 1e-3)) << i;
        }
        std::vector<float> one(dim);
        be->RmsNorm(x.data() + 17 * dim, g.data(), 1, dim, 1e-5f, one.data());
        EXPECT_EQ(0, std::memcmp(one.data(), y.data() + 17 * dim, sizeof(float) * dim));
      }
    }
  }
}

TEST(CpuBackendTest, SiluMulMatchesReferenceAndIsPositionInvariant) {
  auto ref = CreateReferenceBackend();
  const int64_t count = 50000 + 5;  // parallel path with a ragged tail
  auto g = RandomFloats(count, 71, 12.0f);
  g[0] = -100.0f;
  g[1] = 100.0f;
  g[2] = 0.0f;
  const auto u = RandomFloats(count, 72, 2.0f);
  std::vector<float> want(count);
  ref->SiluMul(g.data(), u.data(), count, want.data());
  for (CpuIsa isa : SupportedIsas()) {
    for (int threads : {1, 2}) {
      auto be = CreateCpuBackendWithIsa(threads, isa);
      std::vector<float> y(count);
      be->SiluMul(g.data(), u.data(), count, y.data());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_NEAR(y[i], want[i], 1e-5 * std::fabs(u[i]) * (std::fabs(g[i]) + 1e-3)) << i;
      }
      // The same elements at other offsets and counts (vector tail vs body) agree.
      std::vector<float> part(13);
      be->SiluMul(g.data() + 1003, u.data() + 1003, 13, part.data());
      EXPECT_EQ(0, std::memcmp(part.data(), y.data() + 1003, sizeof(float) * 13));
    }
  }
}

TEST(CpuBackendTest, RopeMatchesReference) {
  auto ref = CreateReferenceBackend();
  const int n = 40, heads = 9, d = 64;
  std::vector<int32_t> pos(n);
  for (int t = 0; t < n; ++t) pos[t] = (t * 37) % 300;
  const auto x = RandomFloats(n * heads * d, 81);
  for (bool adjacent : {true, false}) {
    std::vector<float> want = x;
    ref->Rope(want.data(), pos.data(), n, heads, d, 100000.0f, adjacent);
    for (CpuIsa isa : SupportedIsas()) {
      auto be = CreateCpuBackendWithIsa(2, isa);
      std::vector<float> y = x;
      be->Rope(y.data(), pos.data(), n, heads, d, 100000.0f, adjacent);
      // Shared angle table and per-pair arithmetic: bitwise equal to the reference.
      EXPECT_EQ(0, std::memcmp(y.data(), want.data(), sizeof(float) * y.size()));
    }
  }
}

}  // namespace
}  // namespace loom::kernels
