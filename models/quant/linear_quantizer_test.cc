#include "models/quant/linear_quantizer.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/weight_packing.h"
#include "models/quant/clip_search.h"
#include "models/quant/gptq.h"

namespace loom::quant {
namespace {

using kernels::quant::AtomWeight;
using kernels::quant::QuantSpec;

std::vector<float> HeavyTailed(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = 0.02f * t(rng);
  return v;
}

QuantSpec Spec(int k, int outliers, int group, int bits) {
  QuantSpec s;
  s.k = k;
  s.n_outliers = outliers;
  s.group = group;
  s.w_bits = bits;
  s.a_bits = bits;
  return s;
}

// With the grid {1}, the linear quantizer is RTN: bit for bit kernels/quant's reference.
TEST(QuantizeLinearTest, GridOfOneIsTheRtnReference) {
  for (int bits : {4, 8}) {
    const QuantSpec s = Spec(192, 64, 64, bits);
    const int rows = 9;
    const std::vector<float> w = HeavyTailed(rows * s.k, 11);
    LinearQuantInput in;
    in.w = w.data();
    in.rows = rows;
    in.spec = s;
    in.threads = 3;
    auto got = QuantizeLinear(in);
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = kernels::quant::QuantizeWeightRTN(w.data(), rows, s);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(got->q, want->q);
    EXPECT_EQ(got->scales, want->scales);
    EXPECT_EQ(got->q_outlier, want->q_outlier);
    EXPECT_EQ(got->outlier_scales, want->outlier_scales);
  }
}

// Clip search never does worse than RTN on the weighted error, and does better on
// heavy-tailed groups at 4 bits.
TEST(ClipSearchTest, NeverWorseThanRtnAndUsuallyBetter) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> energy(0.0, 4.0);
  const std::vector<float> grid = ClipRatios({true, 0.5, 20});
  ASSERT_EQ(grid.size(), 20u);
  EXPECT_EQ(grid.front(), 1.0f);
  EXPECT_FLOAT_EQ(grid.back(), 0.5f);
  const int n = 128;
  double total_rtn = 0, total_clip = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> w = HeavyTailed(n, 100 + trial);
    std::vector<double> e(n);
    for (double& x : e) x = energy(rng);
    for (int bits : {4, 8}) {
      std::vector<int8_t> q_rtn(n), q_clip(n);
      const float s_rtn = kernels::quant::QuantizeSymmetricRow(
          w.data(), n, kernels::quant::AbsMax(w.data(), n), bits, q_rtn.data());
      const float s_clip = QuantizeGroupClipSearch(w.data(), e.data(), n, bits, grid, q_clip.data());
      const double err_rtn = WeightedGroupError(w.data(), e.data(), n, q_rtn.data(), s_rtn);
      const double err_clip = WeightedGroupError(w.data(), e.data(), n, q_clip.data(), s_clip);
      EXPECT_LE(err_clip, err_rtn);
      if (bits == 4) {
        total_rtn += err_rtn;
        total_clip += err_clip;
      }
    }
  }
  EXPECT_LT(total_clip, 0.9 * total_rtn);
}

// (H + damp I) * U^T U == I for the factor GPTQ uses.
TEST(GptqTest, FactorInvertsTheDampedHessian) {
  const int k = 48, n = 200;
  std::mt19937 rng(9);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> x(n * k), h(k * k, 0.0);
  for (double& v : x) v = g(rng);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) h[i * k + j] += x[t * k + i] * x[t * k + j];
  auto f = PrepareGptq(h, k, 0.01);
  ASSERT_TRUE(f.ok()) << f.status();
  double mean = 0;
  for (int i = 0; i < k; ++i) mean += h[i * k + i];
  mean /= k;
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) {
      if (j < i) {
        EXPECT_EQ(f->u[i * k + j], 0.0f);
      }
      double s = 0;
      for (int p = 0; p < k; ++p) {
        double inv_pj = 0;  // (U^T U)[p][j]
        for (int q = 0; q <= std::min(p, j); ++q) inv_pj += double{f->u[q * k + p]} * f->u[q * k + j];
        s += (h[i * k + p] + (i == p ? 0.01 * mean : 0.0)) * inv_pj;
      }
      EXPECT_NEAR(s, i == j ? 1.0 : 0.0, 1e-4) << i << "," << j;
    }
  }
}

TEST(GptqTest, RefusesBadHessians) {
  EXPECT_FALSE(PrepareGptq({1, 0, 0}, 2, 0.01).ok());
  EXPECT_FALSE(PrepareGptq({1, 0, 0, 1}, 2, -1).ok());
  EXPECT_FALSE(PrepareGptq({-1, 0, 0, 1}, 2, 0.01).ok());
  // Indefinite without damping.
  EXPECT_EQ(PrepareGptq({1, 2, 2, 1}, 2, 0.0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Sum over tokens of ||x W^T - x What^T||^2.
double OutputError(const std::vector<float>& x, int n, const std::vector<float>& w,
                   const std::vector<float>& wq, int rows, int k) {
  double err = 0;
  for (int t = 0; t < n; ++t) {
    for (int r = 0; r < rows; ++r) {
      double d = 0;
      for (int j = 0; j < k; ++j) d += double{x[t * k + j]} * (w[r * k + j] - wq[r * k + j]);
      err += d * d;
    }
  }
  return err;
}

// On correlated inputs GPTQ's layer-output error is below RTN's (clip search off in both).
TEST(GptqTest, ReducesLayerOutputErrorVsRtnOnCorrelatedInputs) {
  const int k = 128, n = 1024, rows = 24;
  std::mt19937 rng(21);
  std::normal_distribution<float> g(0, 1);
  // x = z M with a random mixing matrix: strongly correlated channels.
  std::vector<float> z(n * 16), m(16 * k), x(n * k, 0.0f);
  for (float& v : z) v = g(rng);
  for (float& v : m) v = g(rng);
  for (int t = 0; t < n; ++t)
    for (int a = 0; a < 16; ++a)
      for (int j = 0; j < k; ++j) x[t * k + j] += z[t * 16 + a] * m[a * k + j] + 0.05f * g(rng) / 16;
  std::vector<double> h(k * k, 0.0);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) h[i * k + j] += double{x[t * k + i]} * x[t * k + j];
  const std::vector<float> w = HeavyTailed(rows * k, 4);
  for (int outliers : {0, 32}) {
    const QuantSpec s = Spec(k, outliers, 32, 4);
    auto f = PrepareGptq(h, k, 0.01);
    ASSERT_TRUE(f.ok());
    LinearQuantInput in;
    in.w = w.data();
    in.rows = rows;
    in.spec = s;
    auto rtn = QuantizeLinear(in);
    in.gptq = &*f;
    in.threads = 2;
    auto gptq = QuantizeLinear(in);
    ASSERT_TRUE(rtn.ok() && gptq.ok());
    const double e_rtn = OutputError(x, n, w, kernels::quant::DequantizeWeight(rtn->view()), rows, k);
    const double e_gptq = OutputError(x, n, w, kernels::quant::DequantizeWeight(gptq->view()), rows, k);
    EXPECT_LT(e_gptq, 0.7 * e_rtn) << "outliers " << outliers << ": rtn " << e_rtn << " gptq " << e_gptq;
  }
}

TEST(QuantizeLinearTest, RefusesBadInput) {
  const std::vector<float> w(64, 1.0f);
  LinearQuantInput in;
  in.w = w.data();
  in.rows = 1;
  in.spec = Spec(64, 0, 33, 4);
  EXPECT_FALSE(QuantizeLinear(in).ok());  // odd group
  in.spec = Spec(64, 0, 32, 4);
  in.rows = 0;
  EXPECT_FALSE(QuantizeLinear(in).ok());
  in.rows = 1;
  std::vector<float> bad = w;
  bad[5] = NAN;
  in.w = bad.data();
  EXPECT_FALSE(QuantizeLinear(in).ok());
}

}  // namespace
}  // namespace loom::quant
