#include "kernels/quant/weight_packing.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace loom::kernels::quant {
namespace {

std::vector<float> Uniform(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

// Independent statement of the rounding: nearest integer to p, ties to even.
int RoundHalfEven(float p) {
  const float fl = std::floor(p);
  const float diff = p - fl;  // exact for |p| < 2^23
  int q = static_cast<int>(fl);
  if (diff > 0.5f || (diff == 0.5f && (q % 2 != 0))) ++q;
  return q;
}

TEST(QuantizeSymmetricRow, MatchesTheHeaderRuleIncludingTies) {
  for (int bits : {4, 8}) {
    const int qmax = bits == 4 ? 7 : 127;
    std::vector<float> x = Uniform(300, 3 + bits, 2.0f);
    // Exact ties: absmax = qmax makes inv = 1, so k + 0.5 must round to even.
    std::vector<float> ties;
    for (int k = -qmax; k < qmax; ++k) ties.push_back(k + 0.5f);
    ties.push_back(static_cast<float>(qmax));
    for (const auto* v : {&x, &ties}) {
      const int n = static_cast<int>(v->size());
      for (float clip : {1.0f, 0.8f}) {
        const float absmax = clip * AbsMax(v->data(), n);
        std::vector<int8_t> q(n);
        const float scale = QuantizeSymmetricRow(v->data(), n, absmax, bits, q.data());
        EXPECT_EQ(scale, absmax / static_cast<float>(qmax));
        const float inv = static_cast<float>(qmax) / absmax;
        for (int i = 0; i < n; ++i) {
          int want = RoundHalfEven((*v)[i] * inv);
          want = want > qmax ? qmax : (want < -qmax ? -qmax : want);
          ASSERT_EQ(q[i], want) << "bits " << bits << " i " << i << " x " << (*v)[i];
        }
      }
    }
  }
}

TEST(QuantizeSymmetricRow, ZeroRowGivesZeros) {
  std::vector<float> x(16, 0.0f);
  std::vector<int8_t> q(16, 5);
  EXPECT_EQ(QuantizeSymmetricRow(x.data(), 16, 0.0f, 4, q.data()), 0.0f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
}

TEST(Packing, FourBitLayoutIsLowNibbleFirstHalfOffsetBinary) {
  const QuantSpec s{256, 0, 128, 4, 4};
  std::vector<int8_t> q(256);
  for (int j = 0; j < 256; ++j) q[j] = static_cast<int8_t>((j * 7) % 16 - 8);
  std::vector<uint8_t> row(s.weight_row_bytes());
  PackNormalRow(q.data(), s, row.data());
  ASSERT_EQ(row.size(), 128u);
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < 64; ++i) {
      const uint8_t b = row[g * 64 + i];
      EXPECT_EQ((b & 0xF), q[g * 128 + i] + 8);
      EXPECT_EQ((b >> 4), q[g * 128 + 64 + i] + 8);
    }
  }
  std::vector<int8_t> back(256);
  UnpackNormalRow(row.data(), s, back.data());
  EXPECT_EQ(back, q);
}

TEST(Packing, EightBitIsPlainBytesAndRoundTrips) {
  const QuantSpec s{200, 8, 64, 8, 8};
  std::vector<int8_t> q(s.k_normal_padded());
  for (size_t j = 0; j < q.size(); ++j) q[j] = static_cast<int8_t>(static_cast<int>(j * 37) % 255 - 127);
  std::vector<uint8_t> row(s.weight_row_bytes());
  PackNormalRow(q.data(), s, row.data());
  for (size_t j = 0; j < q.size(); ++j) EXPECT_EQ(static_cast<int8_t>(row[j]), q[j]);
  std::vector<int8_t> back(q.size());
  UnpackNormalRow(row.data(), s, back.data());
  EXPECT_EQ(back, q);
}

TEST(QuantizeWeightRTN, PerGroupScalesAndBoundedError) {
  for (int w_bits : {4, 8}) {
    const QuantSpec s{200, 8, 64, w_bits, 8};  // k_normal 192 = 3 groups; outliers 8
    const int rows = 5;
    std::vector<float> w = Uniform(static_cast<size_t>(rows) * s.k, 11, 1.0f);
    for (int j = s.k_normal(); j < s.k; ++j) w[j] *= 20.0f;  // row 0: large outliers
    auto q = QuantizeWeightRTN(w.data(), rows, s);
    ASSERT_TRUE(q.ok()) << q.status();
    const AtomWeightView v = q->view();
    ASSERT_EQ(v.rows, rows);
    ASSERT_NE(v.q_outlier, nullptr);
    const std::vector<float> d = DequantizeWeight(v);
    for (int r = 0; r < rows; ++r) {
      for (int g = 0; g < s.n_groups(); ++g) {
        const float absmax = AbsMax(w.data() + r * s.k + g * s.group, s.group);
        EXPECT_EQ(v.scales[r * s.n_groups() + g], absmax / QMax(w_bits));
      }
      const float so = AbsMax(w.data() + r * s.k + s.k_normal(), s.n_outliers) / 127.0f;
      EXPECT_EQ(v.outlier_scales[r], so);
      for (int j = 0; j < s.k; ++j) {
        const float scale = j < s.k_normal() ? v.scales[r * s.n_groups() + j / s.group] : so;
        EXPECT_LE(std::fabs(d[r * s.k + j] - w[r * s.k + j]), 0.5001f * scale)
            << "r " << r << " j " << j;
      }
    }
  }
}

TEST(QuantizeWeightRTN, PartialGroupIsZeroPaddedAndNoOutliersGiveNullViews) {
  const QuantSpec s{100, 0, 64, 4, 4};  // 2 groups, the second 36 wide
  std::vector<float> w = Uniform(3 * 100, 5, 1.0f);
  auto q = QuantizeWeightRTN(w.data(), 3, s);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->view().q_outlier, nullptr);
  EXPECT_EQ(q->view().outlier_scales, nullptr);
  std::vector<int8_t> u(s.k_normal_padded());
  for (int r = 0; r < 3; ++r) {
    UnpackNormalRow(q->q.data() + r * s.weight_row_bytes(), s, u.data());
    for (int j = 100; j < 128; ++j) EXPECT_EQ(u[j], 0);
  }
}

TEST(QuantizeWeightRTN, ClipShrinksScaleAndSaturates) {
  const QuantSpec s{64, 0, 64, 4, 4};
  std::vector<float> w = Uniform(64, 9, 1.0f);
  auto full = QuantizeWeightRTN(w.data(), 1, s, 1.0f);
  auto clipped = QuantizeWeightRTN(w.data(), 1, s, 0.5f);
  ASSERT_TRUE(full.ok() && clipped.ok());
  EXPECT_FLOAT_EQ(clipped->scales[0], 0.5f * full->scales[0]);
  std::vector<int8_t> u(64);
  UnpackNormalRow(clipped->q.data(), s, u.data());
  const int argmax = static_cast<int>(
      std::max_element(w.begin(), w.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) -
      w.begin());
  EXPECT_EQ(std::abs(u[argmax]), 7);
}

TEST(QuantizeWeightRTN, RejectsBadInput) {
  std::vector<float> w(64, 1.0f);
  EXPECT_FALSE(QuantizeWeightRTN(w.data(), 1, QuantSpec{64, 0, 63, 4, 4}).ok());
  EXPECT_FALSE(QuantizeWeightRTN(w.data(), -1, QuantSpec{64, 0, 64, 4, 4}).ok());
  EXPECT_FALSE(QuantizeWeightRTN(w.data(), 1, QuantSpec{64, 0, 64, 4, 4}, 0.0f).ok());
  EXPECT_FALSE(QuantizeWeightRTN(w.data(), 1, QuantSpec{64, 0, 64, 4, 4}, 1.5f).ok());
}

TEST(PermuteColumns, GathersSourceChannels) {
  const float in[6] = {0, 1, 2, 10, 11, 12};
  const int32_t perm[3] = {2, 0, 1};
  float out[6];
  PermuteColumns(in, 2, 3, perm, out);
  const float want[6] = {2, 0, 1, 12, 10, 11};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]);
}

}  // namespace
}  // namespace loom::kernels::quant
