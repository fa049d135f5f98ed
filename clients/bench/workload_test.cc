#include "clients/bench/workload.h"

#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace loom::bench {
namespace {

// Binomial standard deviation of a count of `n` draws with probability p.
double Sigma(double n, double p) { return std::sqrt(n * p * (1 - p)); }

TEST(Workload, ParseNames) {
  EXPECT_EQ(*ParseWorkload("skewed"), Workload::kSkewed);
  EXPECT_EQ(*ParseWorkload("identical"), Workload::kIdentical);
  EXPECT_STREQ(WorkloadName(Workload::kUniform), "uniform");
  EXPECT_FALSE(ParseWorkload("zipf").ok());
}

TEST(Workload, ZipfAlpha15FrequenciesMatchTheory) {
  const int n = 8;
  const double alpha = 1.5;
  // Expected pmf computed here independently: k^-1.5 / H(8, 1.5).
  double h = 0;
  for (int k = 1; k <= n; ++k) h += std::pow(k, -alpha);
  auto picker = AdapterPicker::Create(Workload::kSkewed, n, 1000, alpha);
  ASSERT_TRUE(picker.ok());
  Rng rng(123);
  const int draws = 400000;
  std::vector<int> count(n, 0);
  for (int i = 0; i < draws; ++i) {
    int k = picker->Next(rng);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, n);
    ++count[k];
  }
  for (int k = 0; k < n; ++k) {
    const double p = std::pow(k + 1, -alpha) / h;
    EXPECT_NEAR(count[k], draws * p, 5 * Sigma(draws, p)) << "rank " << k;
  }
  // Rank 1 is 2^1.5 = 2.83x as frequent as rank 2.
  EXPECT_NEAR(static_cast<double>(count[0]) / count[1], std::pow(2.0, 1.5), 0.1);
  ZipfDistribution z(n, alpha);
  EXPECT_NEAR(z.Probability(0), 1.0 / h, 1e-12);
}

TEST(Workload, UniformUsesAboutSqrtNAdapters) {
  EXPECT_EQ(UniformAdapterCount(100, 1000), 10);
  EXPECT_EQ(UniformAdapterCount(1000, 1000), 32);  // sqrt(1000) = 31.6
  EXPECT_EQ(UniformAdapterCount(100, 4), 4);       // clamped to the pool
  EXPECT_EQ(UniformAdapterCount(0, 5), 1);
  auto picker = AdapterPicker::Create(Workload::kUniform, 1000, 100);
  ASSERT_TRUE(picker.ok());
  EXPECT_EQ(picker->adapters_in_use(), 10);
  Rng rng(7);
  const int draws = 100000;
  std::vector<int> count(1000, 0);
  for (int i = 0; i < draws; ++i) ++count[picker->Next(rng)];
  for (int k = 0; k < 10; ++k) EXPECT_NEAR(count[k], draws / 10.0, 5 * Sigma(draws, 0.1)) << k;
  for (int k = 10; k < 1000; ++k) ASSERT_EQ(count[k], 0) << k;
}

TEST(Workload, DistinctAllDifferentIdenticalAllSame) {
  auto distinct = AdapterPicker::Create(Workload::kDistinct, 64, 64);
  auto identical = AdapterPicker::Create(Workload::kIdentical, 64, 64);
  ASSERT_TRUE(distinct.ok() && identical.ok());
  Rng rng(1);
  std::set<int> seen;
  for (int i = 0; i < 64; ++i) {
    seen.insert(distinct->Next(rng));
    EXPECT_EQ(identical->Next(rng), 0);
  }
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_EQ(distinct->Next(rng), 0);  // wraps around the pool
  EXPECT_FALSE(AdapterPicker::Create(Workload::kDistinct, 0, 1).ok());
}

TEST(Workload, PoissonInterArrivalMeanAndVariance) {
  const double rate = 20.0;
  PoissonArrivals arrivals(rate);
  Rng rng(99);
  const int n = 200000;
  double sum = 0, sum2 = 0;
  int longer_than_mean = 0;
  for (int i = 0; i < n; ++i) {
    const double g = arrivals.NextGapSeconds(rng);
    ASSERT_GE(g, 0.0);
    sum += g;
    sum2 += g * g;
    if (g > 1.0 / rate) ++longer_than_mean;
  }
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  // Exponential: mean 1/rate, variance 1/rate^2 (sd of the sample mean = mean/sqrt(n)).
  EXPECT_NEAR(mean, 1.0 / rate, 5 * (1.0 / rate) / std::sqrt(n));
  EXPECT_NEAR(var * rate * rate, 1.0, 0.03);
  // Memorylessness: P(gap > mean) = e^-1.
  EXPECT_NEAR(static_cast<double>(longer_than_mean) / n, std::exp(-1.0), 0.005);
}

TEST(Workload, LengthDistributions) {
  Rng rng(5);
  auto fixed = LengthDistribution::Parse("128");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->Sample(rng), 128);
  auto uni = LengthDistribution::Parse("uniform:10:20");
  ASSERT_TRUE(uni.ok());
  double sum = 0;
  int lo = 1 << 30, hi = 0;
  for (int i = 0; i < 20000; ++i) {
    int v = uni->Sample(rng);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_EQ(lo, 10);
  EXPECT_EQ(hi, 20);
  EXPECT_NEAR(sum / 20000, 15.0, 0.1);
  auto ex = LengthDistribution::Parse("exp:50:100000");
  ASSERT_TRUE(ex.ok());
  sum = 0;
  for (int i = 0; i < 50000; ++i) {
    int v = ex->Sample(rng);
    ASSERT_GE(v, 1);
    sum += v;
  }
  // floor(1 + Exp(mean 49)) has mean 1 + 49 - ~0.5.
  EXPECT_NEAR(sum / 50000, 49.5, 1.5);
  auto capped = LengthDistribution::Parse("exp:50:10");
  for (int i = 0; i < 1000; ++i) ASSERT_LE(capped->Sample(rng), 10);
  for (const char* bad : {"", "0", "x", "uniform:5:2", "uniform:0:3", "exp:0.5:9", "normal:1:2"}) {
    EXPECT_FALSE(LengthDistribution::Parse(bad).ok()) << bad;
  }
}

TEST(Workload, WordPromptHasRequestedWords) {
  Rng rng(3);
  std::string p = MakeWordPrompt(37, rng);
  int spaces = 0;
  for (char c : p) spaces += c == ' ';
  EXPECT_EQ(spaces, 37);
  EXPECT_EQ(p[0], ' ');
}

TEST(Workload, PercentileMatchesNumpyLinear) {
  // numpy.percentile([1,2,3,4], [0, 50, 90, 100]) = [1, 2.5, 3.7, 4].
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_NEAR(Percentile(v, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4.0);
  EXPECT_EQ(Percentile({}, 50), 0.0);
}

}  // namespace
}  // namespace loom::bench
