#include "models/sampling/penalties.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

// Reference: the formulas of penalties.h written out per token, with counts taken by hand.
float Penalised(float logit, int count, const SamplingOptions& o) {
  if (count == 0) return logit;
  float x = logit > 0 ? logit / o.repetition_penalty : logit * o.repetition_penalty;
  return x - (count * o.frequency_penalty + o.presence_penalty);
}

TEST(PenaltiesTest, ChangesExactlyTheTokensInTheWindow) {
  SamplingOptions o;
  o.repetition_penalty = 1.3f;
  o.frequency_penalty = 0.25f;
  o.presence_penalty = 0.5f;
  o.penalty_last_n = 5;
  const std::vector<float> original = {2.0f, -1.0f, 0.5f, 0.0f, 0.0f, 4.0f, 1.0f};
  // Oldest first. Window = last 5 = {1, 1, 4, 1, 0}; token 6 and 2 fall outside.
  const std::vector<int32_t> history = {6, 2, 1, 1, 4, 1, 0};
  const int counts[7] = {1, 3, 0, 0, 1, 0, 0};
  std::vector<float> logits = original;
  std::vector<int32_t> scratch;
  ApplyPenalties(o, history, absl::MakeSpan(logits), &scratch);
  for (int t = 0; t < 7; ++t) {
    EXPECT_FLOAT_EQ(logits[t], Penalised(original[t], counts[t], o)) << "token " << t;
    if (counts[t] == 0) {
      EXPECT_EQ(logits[t], original[t]) << "token " << t;
    }
  }
  // Spot-check the hand arithmetic too: token 1 = -1 * 1.3 - (3 * 0.25 + 0.5) = -2.55.
  EXPECT_FLOAT_EQ(logits[1], -2.55f);
  // Token 4 has logit 0: not > 0, so multiplied (stays 0), then -(1 * 0.25 + 0.5).
  EXPECT_FLOAT_EQ(logits[4], -0.75f);
  // Token 0: 2 / 1.3 - 0.75.
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 1.3f - 0.75f);
}

TEST(PenaltiesTest, WholeHistoryAndEmptyWindow) {
  SamplingOptions o;
  o.presence_penalty = 1.0f;
  const std::vector<int32_t> history = {0, 1, 2};
  std::vector<int32_t> scratch;

  o.penalty_last_n = -1;
  std::vector<float> logits = {1, 1, 1, 1};
  ApplyPenalties(o, history, absl::MakeSpan(logits), &scratch);
  EXPECT_EQ(logits, (std::vector<float>{0, 0, 0, 1}));

  o.penalty_last_n = 0;
  logits = {1, 1, 1, 1};
  ApplyPenalties(o, history, absl::MakeSpan(logits), &scratch);
  EXPECT_EQ(logits, (std::vector<float>{1, 1, 1, 1}));
  EXPECT_TRUE(PenaltiesAreOff(o));

  o.penalty_last_n = 100;  // longer than the history: all of it
  ApplyPenalties(o, history, absl::MakeSpan(logits), &scratch);
  EXPECT_EQ(logits, (std::vector<float>{0, 0, 0, 1}));
}

TEST(PenaltiesTest, OutOfRangeHistoryIdsAreIgnored) {
  SamplingOptions o;
  o.frequency_penalty = 1.0f;
  std::vector<float> logits = {1, 1};
  std::vector<int32_t> scratch;
  const std::vector<int32_t> history = {-1, 2, 7, 1};
  ApplyPenalties(o, history, absl::MakeSpan(logits), &scratch);
  EXPECT_EQ(logits, (std::vector<float>{1, 0}));
}

TEST(PenaltiesTest, DefaultsAreOff) {
  EXPECT_TRUE(PenaltiesAreOff(SamplingOptions()));
  SamplingOptions o;
  o.repetition_penalty = 1.1f;
  EXPECT_FALSE(PenaltiesAreOff(o));
}

TEST(PenaltiesTest, OverflowIsClampedToFltMax) {
  SamplingOptions o;
  o.repetition_penalty = 0.5f;  // divides positive logits by 0.5: FLT_MAX -> inf
  std::vector<float> logits = {3.0e38f};
  std::vector<int32_t> scratch;
  const std::vector<int32_t> history = {0};
  ApplyPenalties(o, history, absl::MakeSpan(logits), &scratch);
  EXPECT_EQ(logits[0], std::numeric_limits<float>::max());
}

}  // namespace
}  // namespace loom
