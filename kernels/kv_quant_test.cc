// QuantizeKvRow / DequantizeKvRow against the formats of backend.h, derived by hand.
#include "kernels/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype.h"

namespace loom::kernels {
namespace {

std::vector<float> RandomRow(int d, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(d);
  for (float& v : x) v = u(rng);
  return x;
}

KvLayout Layout(KvDtype dt, int head_dim) {
  KvLayout l;
  l.page_size = 1;
  l.n_kv_heads = 1;
  l.head_dim = head_dim;
  l.dtype = dt;
  return l;
}

TEST(KvQuantTest, RowBytesFollowTheFormats) {
  EXPECT_EQ(Layout(KvDtype::kF16, 64).row_bytes(), 128u);
  EXPECT_EQ(Layout(KvDtype::kInt8, 64).row_bytes(), 66u);
  EXPECT_EQ(Layout(KvDtype::kInt4, 64).row_bytes(), 36u);
  KvLayout l = Layout(KvDtype::kInt4, 128);
  l.page_size = 16;
  l.n_kv_heads = 8;
  EXPECT_EQ(l.page_bytes(), 16u * 8 * 68);
}

TEST(KvQuantTest, F16IsRoundToNearest) {
  const std::vector<float> x = RandomRow(64, 1, -3.0f, 3.0f);
  std::vector<uint8_t> row(128);
  QuantizeKvRow(KvDtype::kF16, x.data(), 64, row.data());
  std::vector<float> back(64);
  DequantizeKvRow(KvDtype::kF16, row.data(), 64, back.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(back[i], Fp16ToFp32(Fp32ToFp16(x[i]))) << i;
}

// head_dim 48 is not a power of two: rows hold x itself, so the codes follow from x.
TEST(KvQuantTest, Int8HoldsScaleAndCodesOfTheFormat) {
  const int d = 48;
  ASSERT_FALSE(KvRowIsRotated(KvDtype::kInt8, d));
  std::vector<float> x = RandomRow(d, 2, -2.0f, 2.0f);
  x[17] = -5.0f;  // the absmax
  std::vector<uint8_t> row(Layout(KvDtype::kInt8, d).row_bytes());
  QuantizeKvRow(KvDtype::kInt8, x.data(), d, row.data());
  uint16_t s16;
  std::memcpy(&s16, row.data(), 2);
  const float scale = Fp16ToFp32(s16);
  EXPECT_EQ(s16, Fp32ToFp16(5.0f / 127.0f));
  const int8_t* q = reinterpret_cast<const int8_t*>(row.data() + 2);
  EXPECT_EQ(q[17], -127);
  std::vector<float> back(d);
  DequantizeKvRow(KvDtype::kInt8, row.data(), d, back.data());
  for (int i = 0; i < d; ++i) {
    EXPECT_EQ(q[i], static_cast<int8_t>(std::nearbyint(x[i] / scale))) << i;
    EXPECT_EQ(back[i], scale * q[i]);
    EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * scale * 1.001f) << i;
  }
}

TEST(KvQuantTest, Int4IsAsymmetricWithSplitNibbles) {
  const int d = 48;
  ASSERT_FALSE(KvRowIsRotated(KvDtype::kInt4, d));
  std::vector<float> x = RandomRow(d, 3, 0.5f, 1.5f);  // all positive: needs the minimum
  x[3] = 0.25f;                                         // min, in the low half
  x[40] = 2.0f;                                         // max, in the high half
  std::vector<uint8_t> row(Layout(KvDtype::kInt4, d).row_bytes());
  QuantizeKvRow(KvDtype::kInt4, x.data(), d, row.data());
  uint16_t s16, m16;
  std::memcpy(&s16, row.data(), 2);
  std::memcpy(&m16, row.data() + 2, 2);
  EXPECT_EQ(m16, Fp32ToFp16(0.25f));
  EXPECT_EQ(s16, Fp32ToFp16(1.75f / 15.0f));
  const float scale = Fp16ToFp32(s16), m = Fp16ToFp32(m16);
  const uint8_t* q = row.data() + 4;
  EXPECT_EQ(q[3] & 15, 0);         // element 3: low nibble of byte 3
  EXPECT_EQ(q[40 - 24] >> 4, 15);  // element 40: high nibble of byte 16
  std::vector<float> back(d);
  DequantizeKvRow(KvDtype::kInt4, row.data(), d, back.data());
  for (int i = 0; i < d; ++i) {
    const int code = i < d / 2 ? (q[i] & 15) : (q[i - d / 2] >> 4);
    const int want = static_cast<int>(std::fmin(15.0f, std::fmax(0.0f, std::nearbyint((x[i] - m) / scale))));
    EXPECT_EQ(code, want) << i;
    EXPECT_EQ(back[i], scale * static_cast<float>(code) + m) << i;
    // Half a step, plus the FP16 rounding of the scale over 15 steps.
    EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * scale + 15.0f * scale * 1e-3f) << i;
  }
}

// The normalized Walsh-Hadamard transform: orthonormal (H H = I, norms kept) and equal to
// the matrix definition H[i][j] = (-1)^popcount(i & j) / sqrt(d).
TEST(KvQuantTest, HadamardRotateIsTheOrthonormalWalshHadamardMatrix) {
  for (int d : {2, 8, 64, 128}) {
    ASSERT_TRUE(KvRowIsRotated(KvDtype::kInt8, d));
    const std::vector<float> x = RandomRow(d, d, -1.0f, 1.0f);
    std::vector<float> y = x;
    HadamardRotate(y.data(), d);
    double nx = 0, ny = 0;
    for (int i = 0; i < d; ++i) {
      double want = 0;
      for (int j = 0; j < d; ++j) {
        want += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[j];
      }
      EXPECT_NEAR(y[i], want / std::sqrt(d), 1e-5) << "d=" << d << " i=" << i;
      nx += x[i] * x[i];
      ny += y[i] * y[i];
    }
    EXPECT_NEAR(nx, ny, 1e-4 * nx);
    HadamardRotate(y.data(), d);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(y[i], x[i], 1e-6) << "d=" << d;
  }
  EXPECT_FALSE(KvRowIsRotated(KvDtype::kF16, 64));
  EXPECT_FALSE(KvRowIsRotated(KvDtype::kInt4, 96));
}

// Power-of-two head_dim: rows hold the codes of H x, and decode back near x. One large
// channel (a K outlier) no longer sets the step of every channel: the error is far below
// what the unrotated row of the same x gets.
TEST(KvQuantTest, RotatedRowsHoldTheRotatedVectorAndSpreadOutliers) {
  const int d = 64;
  std::vector<float> x = RandomRow(d, 11, -0.5f, 0.5f);
  x[5] = 20.0f;  // outlier channel
  for (KvDtype dt : {KvDtype::kInt8, KvDtype::kInt4}) {
    std::vector<uint8_t> row(Layout(dt, d).row_bytes()), plain(row.size());
    QuantizeKvRow(dt, x.data(), d, row.data());
    std::vector<float> hx = x;
    HadamardRotate(hx.data(), d);
    // The stored values are within half a step of H x.
    std::vector<float> stored(d), back(d);
    DecodeKvRowStored(dt, row.data(), d, stored.data());
    uint16_t s16;
    std::memcpy(&s16, row.data(), 2);
    const float step = Fp16ToFp32(s16);
    for (int i = 0; i < d; ++i) EXPECT_LE(std::fabs(stored[i] - hx[i]), 0.51f * step) << i;
    DequantizeKvRow(dt, row.data(), d, back.data());
    double err = 0, err_plain = 0;
    for (int i = 0; i < d; ++i) err += (back[i] - x[i]) * (back[i] - x[i]);
    // The same x stored unrotated, by hand: absmax (or range) scale over x itself.
    std::vector<float> plain_back(d);
    if (dt == KvDtype::kInt8) {
      const float s = 20.0f / 127.0f;
      for (int i = 0; i < d; ++i) plain_back[i] = s * std::nearbyint(x[i] / s);
    } else {
      float mn = x[0], mx = x[0];
      for (float v : x) { mn = std::min(mn, v); mx = std::max(mx, v); }
      const float s = (mx - mn) / 15.0f;
      for (int i = 0; i < d; ++i) plain_back[i] = mn + s * std::nearbyint((x[i] - mn) / s);
    }
    for (int i = 0; i < d; ++i) err_plain += (plain_back[i] - x[i]) * (plain_back[i] - x[i]);
    EXPECT_LT(err, 0.5 * err_plain) << KvDtypeName(dt) << " rotated " << err << " plain "
                                    << err_plain;
  }
}

TEST(KvQuantTest, ConstantAndZeroRowsDecodeExactly) {
  for (KvDtype dt : {KvDtype::kInt8, KvDtype::kInt4}) {
    std::vector<uint8_t> row(Layout(dt, 8).row_bytes());
    std::vector<float> back(8);
    const std::vector<float> zeros(8, 0.0f);
    QuantizeKvRow(dt, zeros.data(), 8, row.data());
    DequantizeKvRow(dt, row.data(), 8, back.data());
    for (float v : back) EXPECT_EQ(v, 0.0f);
  }
  const std::vector<float> ones(6, 1.5f);  // max == min: d = 0, every value is m (unrotated)
  std::vector<uint8_t> row(Layout(KvDtype::kInt4, 6).row_bytes());
  std::vector<float> back(6);
  QuantizeKvRow(KvDtype::kInt4, ones.data(), 6, row.data());
  DequantizeKvRow(KvDtype::kInt4, row.data(), 6, back.data());
  for (float v : back) EXPECT_EQ(v, 1.5f);
}

TEST(KvQuantTest, ParsesTheFlagNames) {
  for (KvDtype dt : {KvDtype::kF16, KvDtype::kInt8, KvDtype::kInt4}) {
    auto parsed = ParseKvDtype(KvDtypeName(dt));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, dt);
  }
  const auto bad = ParseKvDtype("int2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected f16, int8 or int4"), std::string::npos);
}

}  // namespace
}  // namespace loom::kernels
