// Argmax and Median of the benchmark harness against std::max_element / a sorted copy.
#include "models/llama/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace loom::bench {
namespace {

TEST(BenchStatsTest, ArgmaxIsTheFirstMaximum) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 4.0f);
  for (int n : {1, 7, 8, 9, 100, 49152}) {
    std::vector<float> row(n);
    for (float& v : row) v = g(rng);
    EXPECT_EQ(Argmax(row.data(), n), std::max_element(row.begin(), row.end()) - row.begin())
        << n;
    if (n >= 9) {  // a tie: the earlier index wins
      const float top = *std::max_element(row.begin(), row.end()) + 1.0f;
      row[n - 1] = top;
      row[n / 2] = top;
      EXPECT_EQ(Argmax(row.data(), n), n / 2);
    }
  }
  std::vector<float> row(20, -INFINITY);
  EXPECT_EQ(Argmax(row.data(), 20), 0);
  row[13] = NAN;
  row[17] = -1e30f;
  EXPECT_EQ(Argmax(row.data(), 20), 17);  // NaN is never the maximum
}

TEST(BenchStatsTest, MedianOfOddAndEvenSamples) {
  EXPECT_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

}  // namespace
}  // namespace loom::bench
