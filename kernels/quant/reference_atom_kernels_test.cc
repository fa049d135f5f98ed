#include "kernels/quant/reference_atom_kernels.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/reference_backend.h"
#include "kernels/quant/atom_test_util.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::quant {
namespace {

using testing::ExpectedQuantization;
using testing::RandomPerm;
using testing::RandomValues;

const QuantSpec kSpecs[] = {
    {576, 64, 128, 4, 4}, {200, 0, 128, 4, 8}, {1000, 128, 128, 8, 8}, {96, 32, 64, 4, 4},
};

void ExpectRowMatches(const AtomActivations& a, int t, const float* xp) {
  const QuantSpec& s = a.spec;
  const testing::ExpectedRow e = ExpectedQuantization(xp, s);
  for (int j = 0; j < s.k_normal_padded(); ++j) {
    ASSERT_EQ(a.q[t * s.k_normal_padded() + j], e.q[j]) << "t " << t << " j " << j;
  }
  for (int g = 0; g < s.n_groups(); ++g) ASSERT_EQ(a.scales[t * s.n_groups() + g], e.scales[g]);
  for (int j = 0; j < s.n_outliers; ++j) {
    ASSERT_EQ(a.q_outlier[t * s.n_outliers + j], e.q_outlier[j]) << "t " << t << " j " << j;
  }
  if (s.n_outliers > 0) {
    ASSERT_EQ(a.outlier_scales[t], e.outlier_scale);
  }
}

TEST(ReferenceAtomKernels, QuantizePermutesAndFollowsTheRule) {
  auto k = CreateReferenceAtomKernels();
  AtomActivations a;
  // Dirty the buffers first so that stale padding would show.
  std::vector<float> big = RandomValues(4 * 1000, 1, 3.0f);
  k->Quantize(big.data(), 4, nullptr, QuantSpec{1000, 0, 128, 8, 8}, &a, nullptr);
  for (const QuantSpec& s : kSpecs) {
    const int n = 3;
    std::vector<float> x = RandomValues(static_cast<size_t>(n) * s.k, s.k, 1.0f, s.k, 17);
    std::vector<int32_t> perm = RandomPerm(s.k, 5);
    std::vector<float> permuted(x.size());
    k->Quantize(x.data(), n, perm.data(), s, &a, permuted.data());
    ASSERT_EQ(a.n, n);
    ASSERT_TRUE(a.spec == s);
    for (int t = 0; t < n; ++t) {
      for (int j = 0; j < s.k; ++j) ASSERT_EQ(permuted[t * s.k + j], x[t * s.k + perm[j]]);
      ExpectRowMatches(a, t, permuted.data() + t * s.k);
    }
  }
}

TEST(ReferenceAtomKernels, FusedKernelsComputeHLikeReferenceBackend) {
  auto k = CreateReferenceAtomKernels();
  auto be = CreateReferenceBackend();
  for (const QuantSpec& s : kSpecs) {
    const int n = 3;
    const size_t count = static_cast<size_t>(n) * s.k;
    std::vector<float> x = RandomValues(count, 2, 2.0f, s.k, 13);
    std::vector<float> gamma = RandomValues(s.k, 3, 1.5f);
    std::vector<int32_t> perm = RandomPerm(s.k, 4);
    std::vector<float> h(count), hp(count), normed(count);
    be->RmsNorm(x.data(), gamma.data(), n, s.k, 1e-5f, h.data());
    PermuteColumns(h.data(), n, s.k, perm.data(), hp.data());
    AtomActivations a;
    k->RmsNormQuantize(x.data(), gamma.data(), n, 1e-5f, perm.data(), s, &a, normed.data());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(normed[i], hp[i]) << i;
    for (int t = 0; t < n; ++t) ExpectRowMatches(a, t, hp.data() + t * s.k);

    std::vector<float> up = RandomValues(count, 6, 2.0f);
    std::vector<float> hs(count), hout(count);
    be->SiluMul(x.data(), up.data(), static_cast<int64_t>(count), hs.data());
    k->SiluMulQuantize(x.data(), up.data(), n, s, &a, hout.data());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(hout[i], hs[i]) << i;
    for (int t = 0; t < n; ++t) ExpectRowMatches(a, t, hs.data() + t * s.k);
  }
}

// y equals the dequantized product sum_j w~[r,j] x~[t,j] evaluated in double.
TEST(ReferenceAtomKernels, MatMulEqualsDequantizedProduct) {
  auto k = CreateReferenceAtomKernels();
  for (const QuantSpec& s : kSpecs) {
    const int n = 3, rows = 7;
    std::vector<float> wf = RandomValues(static_cast<size_t>(rows) * s.k, 8, 0.1f);
    auto w = QuantizeWeightRTN(wf.data(), rows, s);
    ASSERT_TRUE(w.ok());
    std::vector<float> x = RandomValues(static_cast<size_t>(n) * s.k, 9, 1.0f, s.k, 11);
    AtomActivations a;
    k->Quantize(x.data(), n, nullptr, s, &a, nullptr);
    std::vector<float> y(static_cast<size_t>(n) * rows);
    k->MatMul(w->view(), a, y.data());
    const std::vector<float> dw = DequantizeWeight(w->view());
    const std::vector<float> dx = DequantizeActivations(a);
    for (int t = 0; t < n; ++t) {
      for (int r = 0; r < rows; ++r) {
        double sum = 0.0, mag = 0.0;
        for (int j = 0; j < s.k; ++j) {
          const double p = static_cast<double>(dw[r * s.k + j]) * dx[t * s.k + j];
          sum += p;
          mag += std::fabs(p);
        }
        EXPECT_NEAR(y[t * rows + r], sum, 1e-5 * mag + 1e-12) << "t " << t << " r " << r;
      }
    }
  }
}

// Sanity: the quantized product approximates the float product, and outlier channels
// kept in INT8 reduce the error when the activation has outliers.
double RelativeError(const QuantSpec& s, const std::vector<float>& wf,
                     const std::vector<float>& x, int n, int rows) {
  auto k = CreateReferenceAtomKernels();
  auto w = QuantizeWeightRTN(wf.data(), rows, s);
  AtomActivations a;
  k->Quantize(x.data(), n, nullptr, s, &a, nullptr);
  std::vector<float> y(static_cast<size_t>(n) * rows);
  k->MatMul(w->view(), a, y.data());
  double err = 0.0, ref = 0.0;
  for (int t = 0; t < n; ++t) {
    for (int r = 0; r < rows; ++r) {
      double f = 0.0;
      for (int j = 0; j < s.k; ++j) f += static_cast<double>(wf[r * s.k + j]) * x[t * s.k + j];
      err += (y[t * rows + r] - f) * (y[t * rows + r] - f);
      ref += f * f;
    }
  }
  return std::sqrt(err / ref);
}

TEST(ReferenceAtomKernels, QuantizedMatMulApproximatesFloat) {
  const int k = 576, n = 4, rows = 64;
  std::vector<float> wf = RandomValues(static_cast<size_t>(rows) * k, 21, 0.1f);
  std::vector<float> x = RandomValues(static_cast<size_t>(n) * k, 22, 1.0f);
  // Outliers: the last 64 channels (the permuted position) are 30x larger.
  for (int t = 0; t < n; ++t) {
    for (int j = k - 64; j < k; ++j) x[t * k + j] *= 30.0f;
  }
  const double w8a8 = RelativeError({k, 64, 128, 8, 8}, wf, x, n, rows);
  const double w4a8 = RelativeError({k, 64, 128, 4, 8}, wf, x, n, rows);
  const double w4a4 = RelativeError({k, 64, 128, 4, 4}, wf, x, n, rows);
  // Uniform values: relative RMS rounding error ~ 1/(sqrt(3) * qmax) per factor.
  EXPECT_LT(w8a8, 0.02);
  EXPECT_LT(w4a8, 0.15);
  EXPECT_LT(w4a4, 0.25);
  EXPECT_LT(w8a8, w4a8);
  EXPECT_LT(w4a8, w4a4);
  // The same data with no outlier channels: the 30x channels share groups with the rest.
  const double w4a4_no_out = RelativeError({k, 0, 128, 4, 4}, wf, x, n, rows);
  EXPECT_LT(w4a4, w4a4_no_out);
}

// QuaRot's online rotation: with the weight folded as W' = W Tᵀ (each row w -> T w), the
// quantized product of HadamardQuantize(x) and W' approximates x Wᵀ within the rounding
// error of the bits alone (the fold is exact), and `rotated` is T x.
TEST(ReferenceAtomKernels, HadamardQuantizeWithFoldedWeightApproximatesFloat) {
  auto kern = CreateReferenceAtomKernels();
  const int k = 576, n = 4, rows = 48;
  const std::vector<float> wf = RandomValues(static_cast<size_t>(rows) * k, 31, 0.1f);
  std::vector<float> x = RandomValues(static_cast<size_t>(n) * k, 32, 1.0f);
  for (int i = 0; i < n; ++i) {  // three outlier channels, 100x (LLM activations' kind)
    for (int j : {5, 200, 401}) x[i * k + j] *= 100.0f;
  }
  const HadamardTransform t = *HadamardTransform::Create(k, HadamardTransform::RandomSigns(k, 3));
  std::vector<float> wr = wf;
  t.Apply(wr.data(), rows);
  std::vector<double> exact(static_cast<size_t>(n) * rows);
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r < rows; ++r) {
      double acc = 0;
      for (int j = 0; j < k; ++j) acc += double(x[i * k + j]) * wf[r * k + j];
      exact[i * rows + r] = acc;
    }
  }
  std::vector<float> want = x;
  t.Apply(want.data(), n);
  auto error = [&](int bits) {
    const QuantSpec s{k, 0, 64, bits, bits};
    AtomWeight q = *QuantizeWeightRTN(wr.data(), rows, s);
    AtomActivations a;
    std::vector<float> xr(static_cast<size_t>(n) * k);
    kern->HadamardQuantize(x.data(), n, t, nullptr, s, &a, xr.data());
    for (size_t i = 0; i < xr.size(); ++i) EXPECT_EQ(xr[i], want[i]) << i;
    std::vector<float> y(static_cast<size_t>(n) * rows);
    kern->MatMul(q.view(), a, y.data());
    double num = 0, den = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      num += (y[i] - exact[i]) * (y[i] - exact[i]);
      den += exact[i] * exact[i];
    }
    return std::sqrt(num / den);
  };
  EXPECT_LT(error(8), 0.02);
  EXPECT_LT(error(4), 0.25);
}

TEST(ReferenceAtomKernels, MismatchedSpecsGiveNaN) {
  auto k = CreateReferenceAtomKernels();
  const QuantSpec s{128, 0, 128, 4, 4};
  std::vector<float> wf = RandomValues(2 * 128, 1, 0.1f);
  auto w = QuantizeWeightRTN(wf.data(), 2, s);
  AtomActivations a;
  std::vector<float> x = RandomValues(128, 2);
  QuantSpec other = s;
  other.a_bits = 8;
  k->Quantize(x.data(), 1, nullptr, other, &a, nullptr);
  std::vector<float> y(2, 0.0f);
  k->MatMul(w->view(), a, y.data());
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
}

}  // namespace
}  // namespace loom::kernels::quant
