#include "models/llama/step_profile.h"

#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(StepProfile, TableShowsMsPerStepAndShares) {
  StepProfile p;
  p.steps = 4;
  p.Add(StepOp::kAttention, 3'000'000);  // 3 ms over 4 steps
  p.Add(StepOp::kHead, 1'000'000);
  EXPECT_EQ(p.total_ns(), 4'000'000);
  const std::string t = p.Table();
  EXPECT_NE(t.find("attention                0.75 ms/step  75.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("output head              0.25 ms/step  25.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("total                    1.00 ms/step (4 steps)"), std::string::npos) << t;
  EXPECT_EQ(t.find("rope"), std::string::npos) << "operations never timed are left out";
  p.Clear();
  EXPECT_EQ(p.total_ns(), 0);
  EXPECT_EQ(p.steps, 0);
}

TEST(StepProfile, TimerAddsItsScopeOnlyWhenAProfileIsGiven) {
  StepProfile p;
  {
    StepTimer t(&p, StepOp::kRope);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_GE(p.ns[static_cast<int>(StepOp::kRope)], 2'000'000);
  EXPECT_EQ(p.total_ns(), p.ns[static_cast<int>(StepOp::kRope)]);
  { StepTimer none(nullptr, StepOp::kRope); }  // no profile: nothing to write, no crash
}

TEST(StepProfile, EveryOperationHasAName) {
  for (int i = 0; i < static_cast<int>(StepOp::kCount); ++i) {
    EXPECT_STRNE(StepOpName(static_cast<StepOp>(i)), "?") << i;
  }
}

}  // namespace
}  // namespace loom
