#include "models/quant/channel_permutation.h"

#include <cmath>
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
