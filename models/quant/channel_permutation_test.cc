#include "models/quant/channel_permutation.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/weight_packing.h"

namespace loom::quant {
namespace {

// Planted high-energy channels are the ones moved to the end.
TEST(OutlierPermutationTest, PicksPlantedHighEnergyChannels) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0, 1);
  const int k = 96, tokens = 200;
  const std::vector<int> planted = {5, 17, 40, 41, 77, 90};
  std::vector<double> energy(k, 0.0);
  for (int t = 0; t < tokens; ++t) {
    for (int c = 0; c < k; ++c) {
      float x = n(rng);
      for (int p : planted) if (p == c) x *= 10;
      energy[c] += static_cast<double>(x) * x;
    }
  }
  auto perm = OutlierPermutation(energy, static_cast<int>(planted.size()));
  ASSERT_TRUE(perm.ok()) << perm.status();
  ASSERT_EQ(perm->size(), static_cast<size_t>(k));
  EXPECT_TRUE(IsPermutation(perm->data(), k));
  std::vector<int> tail(perm->end() - planted.size(), perm->end());
  EXPECT_EQ(tail, planted);
  // Normal channels keep ascending order.
  for (int j = 1; j < k - static_cast<int>(planted.size()); ++j) EXPECT_LT((*perm)[j - 1], (*perm)[j]);
}

TEST(OutlierPermutationTest, ZeroOutliersIsIdentity) {
  auto perm = OutlierPermutation({3, 1, 2}, 0);
  ASSERT_TRUE(perm.ok());
  EXPECT_EQ(*perm, (std::vector<int32_t>{0, 1, 2}));
}

TEST(OutlierPermutationTest, RefusesBadInput) {
  EXPECT_FALSE(OutlierPermutation({}, 0).ok());
  EXPECT_FALSE(OutlierPermutation({1, 2}, 3).ok());
  EXPECT_FALSE(OutlierPermutation({1, 2}, -1).ok());
  EXPECT_FALSE(OutlierPermutation({1, NAN}, 1).ok());
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

// y = down · (silu(gate x) * (up x)) for x [h], gate/up [m, h], down [h, m].
std::vector<double> Ffn(const std::vector<float>& x, const std::vector<float>& gate,
                        const std::vector<float>& up, const std::vector<float>& down, int h,
                        int m, std::vector<float>* mid) {
  mid->assign(m, 0);
  for (int r = 0; r < m; ++r) {
    float g = 0, u = 0;  // integer-valued products: exact in any order
    for (int c = 0; c < h; ++c) {
      g += gate[r * h + c] * x[c];
      u += up[r * h + c] * x[c];
    }
    (*mid)[r] = Silu(g) * u;
  }
  std::vector<double> y(h, 0);
  for (int r = 0; r < h; ++r) {
    for (int c = 0; c < m; ++c) y[r] += static_cast<double>(down[r * m + c]) * (*mid)[c];
  }
  return y;
}

// Folding: permuted input x permuted columns = original; gate/up rows permuted by down's
// input order make silu(gate)*up come out in that order, bit for bit.
// OwqScores = energy_j * sum over weights and rows of the RTN error of w[r, j], the RTN
// taken per (row, group of consecutive channels) by kernels/quant's reference rule.
TEST(OwqScoresTest, MatchesTheDefinition) {
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0, 0.05f);
  const int k = 40, group = 16;  // last group: 8 channels
  std::vector<float> a(3 * k), b(5 * k);
  for (float& v : a) v = g(rng);
  for (float& v : b) v = g(rng);
  std::vector<double> energy(k);
  for (int j = 0; j < k; ++j) energy[j] = 0.5 + j % 7;
  auto got = OwqScores(energy, {{a.data(), 3}, {b.data(), 5}}, group, 4);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> want(k, 0.0);
  for (const auto& [w, rows] : {std::pair<const float*, int>{a.data(), 3}, {b.data(), 5}}) {
    for (int r = 0; r < rows; ++r) {
      for (int j0 = 0; j0 < k; j0 += group) {
        const int n = std::min(group, k - j0);
        std::vector<int8_t> q(n);
        const float* x = w + r * k + j0;
        const float s = kernels::quant::QuantizeSymmetricRow(x, n, kernels::quant::AbsMax(x, n), 4, q.data());
        for (int i = 0; i < n; ++i) {
          const double d = double{x[i]} - double{q[i]} * s;
          want[j0 + i] += d * d;
        }
      }
    }
  }
  for (int j = 0; j < k; ++j) EXPECT_NEAR((*got)[j], energy[j] * want[j], 1e-12 * (1 + want[j])) << j;
  EXPECT_FALSE(OwqScores({}, {{a.data(), 3}}, group, 4).ok());
  EXPECT_FALSE(OwqScores(energy, {}, group, 4).ok());
  EXPECT_FALSE(OwqScores(energy, {{a.data(), 3}}, 0, 4).ok());
  energy[3] = NAN;
  EXPECT_FALSE(OwqScores(energy, {{a.data(), 3}}, group, 4).ok());
}

// A channel of high energy whose weights quantize exactly (a multiple of the group's
// step) is no OWQ outlier; a lower-energy channel with a large rounding error is.
TEST(OwqScoresTest, PrefersCostlyChannelsOverMerelyLoudOnes) {
  const int k = 8;
  // One row, one group of 8: absmax 0.7 -> step 0.1. Channel 0 (energy 100) sits on the
  // grid; channel 5 (energy 2) is half a step off it.
  std::vector<float> w = {0.3f, 0.1f, -0.2f, 0.7f, 0.0f, 0.45f, -0.1f, 0.2f};
  std::vector<double> energy = {100, 1, 1, 1, 1, 2, 1, 1};
  auto s = OwqScores(energy, {{w.data(), 1}}, 8, 4);
  ASSERT_TRUE(s.ok());
  auto perm = OutlierPermutation(*s, 1);
  ASSERT_TRUE(perm.ok());
  EXPECT_EQ(perm->back(), 5);
  EXPECT_EQ(OutlierPermutation(energy, 1)->back(), 0);
}

TEST(PermutationFoldingTest, PreservesTheFeedForwardFunction) {
  const int h = 24, m = 40;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = static_cast<float>(small(rng));
    return v;
  };
  const std::vector<float> x = fill(h), gate = fill(m * h), up = fill(m * h), down = fill(h * m);
  std::vector<double> e_in(h), e_mid(m);
  for (double& e : e_in) e = small(rng) + 3;
  for (double& e : e_mid) e = small(rng) + 3;
  auto p_in = OutlierPermutation(e_in, 8);
  auto p_mid = OutlierPermutation(e_mid, 8);
  ASSERT_TRUE(p_in.ok() && p_mid.ok());

  std::vector<float> x2(h);
  for (int j = 0; j < h; ++j) x2[j] = x[(*p_in)[j]];
  std::vector<float> gate_c(m * h), up_c(m * h), down2(h * m);
  kernels::quant::PermuteColumns(gate.data(), m, h, p_in->data(), gate_c.data());
  kernels::quant::PermuteColumns(up.data(), m, h, p_in->data(), up_c.data());
  const std::vector<float> gate2 = GatherRows(gate_c.data(), h, *p_mid);
  const std::vector<float> up2 = GatherRows(up_c.data(), h, *p_mid);
  kernels::quant::PermuteColumns(down.data(), h, m, p_mid->data(), down2.data());

  std::vector<float> mid, mid2;
  const std::vector<double> y = Ffn(x, gate, up, down, h, m, &mid);
  const std::vector<double> y2 = Ffn(x2, gate2, up2, down2, h, m, &mid2);
  for (int j = 0; j < m; ++j) EXPECT_EQ(mid2[j], mid[(*p_mid)[j]]) << j;
  for (int r = 0; r < h; ++r) EXPECT_NEAR(y2[r], y[r], 1e-9 * (1 + std::abs(y[r]))) << r;
}

TEST(PermutationFoldingTest, PermuteSymmetricMatchesDefinition) {
  const int k = 5;
  std::vector<double> hm(k * k);
  for (int i = 0; i < k; ++i) for (int j = 0; j < k; ++j) hm[i * k + j] = 10 * i + j;
  const std::vector<int32_t> perm = {3, 0, 4, 1, 2};
  const std::vector<double> p = PermuteSymmetric(hm, perm);
  for (int i = 0; i < k; ++i) for (int j = 0; j < k; ++j) EXPECT_EQ(p[i * k + j], 10 * perm[i] + perm[j]);
  EXPECT_EQ(PermuteVector({0, 10, 20, 30, 40}, perm), (std::vector<double>{30, 0, 40, 10, 20}));
}

}  // namespace
}  // namespace loom::quant
