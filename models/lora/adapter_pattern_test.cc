#include "models/lora/adapter_pattern.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "re2/re2.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

TEST(AdapterPattern, CompilesPeftStylePatternsForWholeStringMatching) {
  auto re = CompileAdapterPattern("cfg", "target_modules", R"(.*\.(q_proj|v_proj))");
  ASSERT_TRUE(re.ok()) << re.status();
  EXPECT_TRUE(re2::RE2::FullMatch("model.layers.3.self_attn.q_proj", **re));
  EXPECT_FALSE(re2::RE2::FullMatch("model.layers.3.self_attn.k_proj", **re));
  EXPECT_FALSE(re2::RE2::FullMatch("model.layers.3.self_attn.q_proj.x", **re));
}

TEST(AdapterPattern, NestingDepthCountsUnescapedGroups) {
  EXPECT_EQ(PatternNestingDepth("q_proj"), 0);
  EXPECT_EQ(PatternNestingDepth("(a(b)(c(d)))"), 3);
  EXPECT_EQ(PatternNestingDepth(R"(\(\(\(a)"), 0);
  EXPECT_EQ(PatternNestingDepth(std::string(30000, '(') + std::string(30000, ')')), 30000);
}

TEST(AdapterPattern, A30kDeepPatternIsRefusedBeforeCompiling) {
  // std::regex recursed once per level here and overflowed the loader thread's stack.
  const std::string deep = std::string(30000, '(') + "q_proj" + std::string(30000, ')');
  auto re = CompileAdapterPattern("cfg", "target_modules", deep);
  ASSERT_EQ(re.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(re.status().message()), HasSubstr("is longer than 1024 bytes"));
  const std::string nested = std::string(40, '(') + "q" + std::string(40, ')');
  re = CompileAdapterPattern("cfg", "target_modules", nested);
  ASSERT_EQ(re.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(re.status().message()), HasSubstr("nests groups 40 deep"));
}

TEST(AdapterPattern, CatastrophicBacktrackingPatternsMatchInLinearTime) {
  // (.|.)*Z backtracks 2^n ways in std::regex; RE2 answers at once even on a long text.
  auto re = CompileAdapterPattern("cfg", "target_modules", "(.|.)*Z");
  ASSERT_TRUE(re.ok()) << re.status();
  EXPECT_FALSE(re2::RE2::FullMatch(std::string(100000, 'a'), **re));
  auto re2 = CompileAdapterPattern("cfg", "target_modules", "(a+)+$");
  ASSERT_TRUE(re2.ok()) << re2.status();
  EXPECT_FALSE(re2::RE2::FullMatch(std::string(100000, 'a') + "!", **re2));
}

TEST(AdapterPattern, WhatRe2CannotExpressIsRefusedWithTheReason) {
  for (const char* p : {R"((a)\1)", "q(?=_proj)", "(?<!x)q"}) {
    auto re = CompileAdapterPattern("cfg", "target_modules", p);
    ASSERT_EQ(re.status().code(), absl::StatusCode::kFailedPrecondition) << p;
    EXPECT_THAT(std::string(re.status().message()), HasSubstr("is not supported")) << p;
  }
  auto big = CompileAdapterPattern("cfg", "target_modules", "((a{100}){100}){100}");
  ASSERT_EQ(big.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loom
