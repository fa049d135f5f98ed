// Compare / CompareAdapter on hand-made runs (counts derived by hand in the comments).
#include "models/eval/greedy_agreement.h"

#include "gtest/gtest.h"

namespace loom {
namespace {

GreedyRun MakeRun(std::vector<std::vector<int32_t>> argmax,
                  std::vector<std::vector<int32_t>> generated) {
  GreedyRun r;
  r.argmax = std::move(argmax);
  r.generated = std::move(generated);
  return r;
}

TEST(GreedyAgreementTest, CompareCountsTop1PrefixAndMatches) {
  const GreedyRun ref = MakeRun({{1, 2, 3, 4}, {5, 6}}, {{7, 8, 9}, {1, 1, 1}});
  const GreedyRun test = MakeRun({{1, 0, 3, 4}, {5, 0}}, {{7, 0, 9}, {1, 1, 1}});
  const AgreementStats s = Compare(test, ref);
  EXPECT_EQ(s.positions, 6);
  EXPECT_DOUBLE_EQ(s.top1, 4.0 / 6);       // positions 1 of each prompt differ
  EXPECT_DOUBLE_EQ(s.gen_prefix, (1 + 3) / 2.0);  // first prompt diverges at token 1
  EXPECT_DOUBLE_EQ(s.gen_match, 5.0 / 6);  // one of six generated tokens differs
  const AgreementStats self = Compare(ref, ref);
  EXPECT_DOUBLE_EQ(self.top1, 1.0);
  EXPECT_DOUBLE_EQ(self.gen_match, 1.0);
}

TEST(GreedyAgreementTest, AdapterDirectionOnlyCountsMovedPositions) {
  const GreedyRun ref = MakeRun({{1, 2, 3, 4}}, {{}});
  const GreedyRun ref_a = MakeRun({{1, 9, 8, 4}}, {{}});   // moved at positions 1 and 2
  const GreedyRun test = MakeRun({{1, 2, 8, 0}}, {{}});    // already 8 at 2 without adapter
  const GreedyRun test_a = MakeRun({{0, 9, 7, 0}}, {{}});  // follows at 1, not at 2
  const AdapterDirection d = CompareAdapter(ref, ref_a, test, test_a);
  EXPECT_EQ(d.moved, 2);
  EXPECT_DOUBLE_EQ(d.followed, 0.5);
  EXPECT_DOUBLE_EQ(d.followed_base, 0.5);
  const AdapterDirection none = CompareAdapter(ref, ref, test, test_a);
  EXPECT_EQ(none.moved, 0);
  EXPECT_DOUBLE_EQ(none.followed, 0.0);
}

}  // namespace
}  // namespace loom
