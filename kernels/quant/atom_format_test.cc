#include "kernels/quant/atom_format.h"

#include "gtest/gtest.h"

namespace loom::kernels::quant {
namespace {

TEST(QuantScheme, NamesRoundTripAndBits) {
  for (QuantScheme s :
       {QuantScheme::kNone, QuantScheme::kW8A8, QuantScheme::kW4A8, QuantScheme::kW4A4}) {
    auto parsed = ParseQuantScheme(QuantSchemeName(s));
    ASSERT_TRUE(parsed.ok()) << QuantSchemeName(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(ParseQuantScheme("w4a16").ok());
  EXPECT_EQ(SchemeWeightBits(QuantScheme::kW8A8), 8);
  EXPECT_EQ(SchemeActivationBits(QuantScheme::kW8A8), 8);
  EXPECT_EQ(SchemeWeightBits(QuantScheme::kW4A8), 4);
  EXPECT_EQ(SchemeActivationBits(QuantScheme::kW4A8), 8);
  EXPECT_EQ(SchemeWeightBits(QuantScheme::kW4A4), 4);
  EXPECT_EQ(SchemeActivationBits(QuantScheme::kW4A4), 4);
  EXPECT_EQ(SchemeWeightBits(QuantScheme::kNone), 0);
}

TEST(QuantSpec, Geometry) {
  QuantSpec s{576, 64, 128, 4, 4};
  ASSERT_TRUE(s.Validate().ok());
  EXPECT_EQ(s.k_normal(), 512);
  EXPECT_EQ(s.n_groups(), 4);
  EXPECT_EQ(s.k_normal_padded(), 512);
  EXPECT_EQ(s.weight_row_bytes(), 256u);
  QuantSpec p{200, 0, 128, 8, 8};  // partial last group
  EXPECT_EQ(p.n_groups(), 2);
  EXPECT_EQ(p.k_normal_padded(), 256);
  EXPECT_EQ(p.weight_row_bytes(), 256u);
  QuantSpec all_out{64, 64, 128, 4, 4};  // no normal channels at all
  ASSERT_TRUE(all_out.Validate().ok());
  EXPECT_EQ(all_out.n_groups(), 0);
  EXPECT_EQ(all_out.weight_row_bytes(), 0u);
}

TEST(QuantSpec, ValidateRejectsEachBadField) {
  const QuantSpec good{576, 64, 128, 4, 4};
  QuantSpec s = good;
  s.k = 0;
  EXPECT_FALSE(s.Validate().ok());
  s = good;
  s.n_outliers = -1;
  EXPECT_FALSE(s.Validate().ok());
  s.n_outliers = 577;
  EXPECT_FALSE(s.Validate().ok());
  s = good;
  s.group = 127;
  EXPECT_FALSE(s.Validate().ok());
  s.group = 0;
  EXPECT_FALSE(s.Validate().ok());
  s = good;
  s.w_bits = 2;
  EXPECT_FALSE(s.Validate().ok());
  s = good;
  s.a_bits = 16;
  EXPECT_FALSE(s.Validate().ok());
  EXPECT_TRUE(good == QuantSpec(good));
  s = good;
  s.a_bits = 8;
  EXPECT_TRUE(good != s);
}

TEST(AtomActivations, ResizeGrowsNeverShrinks) {
  AtomActivations a;
  a.Resize(QuantSpec{576, 64, 128, 4, 4}, 8);
  EXPECT_EQ(a.n, 8);
  EXPECT_GE(a.q.size(), 8u * 512);
  EXPECT_GE(a.scales.size(), 8u * 4);
  EXPECT_GE(a.q_outlier.size(), 8u * 64);
  EXPECT_GE(a.outlier_scales.size(), 8u);
  const size_t cap = a.q.size();
  a.Resize(QuantSpec{576, 64, 128, 4, 4}, 2);
  EXPECT_EQ(a.n, 2);
  EXPECT_EQ(a.q.size(), cap);
}

}  // namespace
}  // namespace loom::kernels::quant
