#include "kernels/dtype.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(DTypeTest, Fp16RoundTripsEveryFiniteHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1F) == 0x1F) continue;  // inf/nan
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    EXPECT_EQ(Fp32ToFp16(f), static_cast<uint16_t>(h)) << h;
  }
}

TEST(DTypeTest, Fp16KnownValues) {
  EXPECT_EQ(Fp16ToFp32(0x3C00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xC000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);  // rounds to inf
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(Bf16ToFp32(Fp32ToBf16(1.0f)), 1.0f);
  EXPECT_EQ(Fp32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

TEST(DTypeTest, RowBytes) {
  EXPECT_EQ(*DTypeRowBytes(DType::kQ4_1, 576), 18u * 20u);
  EXPECT_EQ(*DTypeRowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(*DTypeRowBytes(DType::kF16, 3), 6u);
  EXPECT_FALSE(DTypeRowBytes(DType::kQ4_0, 33).has_value());
  EXPECT_FALSE(DTypeRowBytes(DType::kF32, int64_t{1} << 62).has_value());
}

TEST(DTypeTest, DequantizeQ4_1Block) {
  BlockQ4_1 b;
  b.d = Fp32ToFp16(0.5f);
  b.m = Fp32ToFp16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j & 0xF) | ((15 - j) << 4));
  float out[32];
  DequantizeRow(DType::kQ4_1, &b, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], j * 0.5f - 1.0f);
    EXPECT_EQ(out[j + 16], (15 - j) * 0.5f - 1.0f);
  }
}

TEST(DTypeTest, DequantizeQ4_0AndQ8_0) {
  BlockQ4_0 b;
  b.d = Fp32ToFp16(2.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  float out[32];
  DequantizeRow(DType::kQ4_0, &b, out, 32);
  EXPECT_EQ(out[0], -16.0f);
  EXPECT_EQ(out[31], 14.0f);
  BlockQ8_0 c;
  c.d = Fp32ToFp16(0.25f);
  for (int j = 0; j < 32; ++j) c.qs[j] = static_cast<int8_t>(j - 16);
  DequantizeRow(DType::kQ8_0, &c, out, 32);
  EXPECT_EQ(out[0], -4.0f);
  EXPECT_EQ(out[31], 3.75f);
}

}  // namespace
}  // namespace loom
