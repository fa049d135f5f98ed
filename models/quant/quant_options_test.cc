#include "models/quant/quant_options.h"

#include <string>

#include "gtest/gtest.h"

namespace loom::quant {
namespace {

using kernels::quant::QuantScheme;

const std::array<int, 4> kSmol = {576, 576, 576, 1536};

TEST(ResolveOutlierCountsTest, DefaultsForSmolLM2) {
  QuantOptions o;
  auto c = ResolveOutlierCounts(kSmol, o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (OutlierCounts{64, 64, 64, 128}));
  o.default_outliers = 0;  // w4a8 without outliers where the width allows it
  c = ResolveOutlierCounts(kSmol, o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (OutlierCounts{64, 64, 64, 0}));
  o.outliers = {192, -1, 64, 256};
  c = ResolveOutlierCounts(kSmol, o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (OutlierCounts{192, 64, 64, 256}));
}

void ExpectRefused(const QuantOptions& o, const std::string& words) {
  auto c = ResolveOutlierCounts(kSmol, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status();
}

TEST(ResolveOutlierCountsTest, Refusals) {
  QuantOptions o;
  o.group_size = 63;
  ExpectRefused(o, "must be positive and even");
  o.group_size = 0;
  ExpectRefused(o, "must be positive and even");
  o.group_size = 1024;
  ExpectRefused(o, "does not fit activation attn_norm");
  o.group_size = 128;
  o.outliers = {-1, -1, -1, 100};
  ExpectRefused(o, "outlier count 100 for silu_mul");
  o.outliers = {0, -1, -1, -1};
  ExpectRefused(o, "leaves 576 normal channels, not a positive multiple of the group size 128");
  o.outliers = {576, -1, -1, -1};
  ExpectRefused(o, "attn_norm");
  o.outliers = {-1, -1, -1, -1};
  o.default_outliers = 100;
  ExpectRefused(o, "default outlier count 100");
  o = QuantOptions();
  o.scheme = QuantScheme::kNone;
  ExpectRefused(o, "nothing to quantize");
}

TEST(ValidateClipSearchTest, Ranges) {
  EXPECT_TRUE(ValidateClipSearch({true, 0.5, 20}).ok());
  EXPECT_FALSE(ValidateClipSearch({true, 0.0, 20}).ok());
  EXPECT_FALSE(ValidateClipSearch({true, 1.5, 20}).ok());
  EXPECT_FALSE(ValidateClipSearch({true, 0.5, 0}).ok());
}

TEST(ValidateOutlierSelectionTest, Names) {
  EXPECT_TRUE(ValidateOutlierSelection("energy").ok());
  EXPECT_TRUE(ValidateOutlierSelection("owq").ok());
  EXPECT_FALSE(ValidateOutlierSelection("awq").ok());
  EXPECT_FALSE(ValidateOutlierSelection("").ok());
}

TEST(ValidateGptqOptionsTest, Combinations) {
  QuantOptions o;
  EXPECT_TRUE(ValidateGptqOptions(o).ok());
  o.gptq_act_order = true;
  EXPECT_FALSE(ValidateGptqOptions(o).ok());  // needs --gptq
  o.gptq = true;
  EXPECT_TRUE(ValidateGptqOptions(o).ok());
  o.gptq_static_groups = true;
  EXPECT_TRUE(ValidateGptqOptions(o).ok());
  o.gptq_hessian_scale_search = true;
  EXPECT_FALSE(ValidateGptqOptions(o).ok());  // not with act order / static groups
  o.gptq_act_order = o.gptq_static_groups = false;
  EXPECT_TRUE(ValidateGptqOptions(o).ok());
  o.gptq_damp = -0.1;
  EXPECT_FALSE(ValidateGptqOptions(o).ok());
  o.gptq_damp = 0;
  EXPECT_TRUE(ValidateGptqOptions(o).ok());
  QuantOptions no_gptq;
  no_gptq.gptq_static_groups = true;
  EXPECT_FALSE(ValidateGptqOptions(no_gptq).ok());
  no_gptq.gptq_static_groups = false;
  no_gptq.refit_scales = true;  // needs the Hessians
  EXPECT_FALSE(ValidateGptqOptions(no_gptq).ok());
  no_gptq.refit_scales = false;
  no_gptq.w4_full_range = true;  // fine without GPTQ (clip search uses it too)
  EXPECT_TRUE(ValidateGptqOptions(no_gptq).ok());
}

}  // namespace
}  // namespace loom::quant
