#include "models/quant/calibration_mix.h"

#include <numeric>

#include "gtest/gtest.h"

namespace loom::quant {
namespace {

TEST(CalibrationMix, ParsesPathsAndWeights) {
  auto t = ParseWeightedTexts("eval/calibration.txt:2, code.txt ,man.txt:0.5");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].path, "eval/calibration.txt");
  EXPECT_EQ((*t)[0].weight, 2.0);
  EXPECT_EQ((*t)[1].path, "code.txt");
  EXPECT_EQ((*t)[1].weight, 1.0);
  EXPECT_EQ((*t)[2].weight, 0.5);
  for (const char* bad : {"", "a.txt:0", "a.txt:-1", "a.txt:x", ":2", "a.txt:nan"}) {
    EXPECT_EQ(ParseWeightedTexts(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CalibrationMix, SplitsSequencesByWeightAndGivesEachTextOne) {
  EXPECT_EQ(*SplitSequences(32, {1, 1, 1}), (std::vector<int>{11, 11, 10}));
  EXPECT_EQ(*SplitSequences(48, {2, 1, 1}), (std::vector<int>{24, 12, 12}));
  const std::vector<int> tiny = *SplitSequences(3, {100, 1, 1});
  EXPECT_EQ(tiny, (std::vector<int>{1, 1, 1}));
  for (int total : {17, 64, 200}) {
    const std::vector<int> s = *SplitSequences(total, {0.3, 2.5, 1, 7});
    EXPECT_EQ(std::accumulate(s.begin(), s.end(), 0), total);
    for (int v : s) EXPECT_GE(v, 1);
    EXPECT_GT(s[3], s[1]);
    EXPECT_GT(s[1], s[0]);
  }
  EXPECT_EQ(SplitSequences(2, {1, 1, 1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitSequences(4, {1, 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CalibrationMix, HeldOutNames) {
  EXPECT_TRUE(IsHeldOutName("/x/eval/heldout.txt"));
  EXPECT_TRUE(IsHeldOutName("heldout-policy.txt"));
  EXPECT_FALSE(IsHeldOutName("/x/heldout/calibration.txt"));
  EXPECT_FALSE(IsHeldOutName("calibration-heldout.txt"));
}

}  // namespace
}  // namespace loom::quant
