#include "scheduler/sim/workload.h"

#include <cmath>
#include <map>
#include <set>

#include "gtest/gtest.h"

namespace loom {
namespace {

std::vector<SimRequest> Make(AdapterWorkload kind, int n, double rate = 4.0) {
  WorkloadOptions o;
  o.adapters = kind;
  o.num_requests = n;
  o.arrival_rate = rate;
  absl::StatusOr<std::vector<SimRequest>> r = GenerateWorkload(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(Workload, AdapterPopularityPerWorkload) {
  const int n = 10000;
  std::set<int> distinct;
  for (const SimRequest& r : Make(AdapterWorkload::kDistinct, n)) distinct.insert(r.adapter);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(n));
  for (const SimRequest& r : Make(AdapterWorkload::kIdentical, n)) EXPECT_EQ(r.adapter, 0);
  std::map<int, int> uniform;
  for (const SimRequest& r : Make(AdapterWorkload::kUniform, n)) ++uniform[r.adapter];
  EXPECT_EQ(uniform.size(), 100u);  // ceil(sqrt(10000)), all used at ~100 each
  for (const auto& [a, count] : uniform) {
    EXPECT_GE(a, 0);
    EXPECT_LT(a, 100);
    EXPECT_NEAR(count, 100, 45);
  }
  // Zipf(1.5) over n ranks: P(rank 1) = 1 / sum_k k^-1.5.
  double h = 0;
  for (int k = 1; k <= n; ++k) h += std::pow(k, -1.5);
  std::map<int, int> skewed;
  for (const SimRequest& r : Make(AdapterWorkload::kSkewed, n)) ++skewed[r.adapter];
  EXPECT_NEAR(skewed[0] / static_cast<double>(n), 1.0 / h, 0.02);
  EXPECT_NEAR(skewed[1] / static_cast<double>(n), std::pow(2, -1.5) / h, 0.02);
}

TEST(Workload, PoissonArrivalsAndLengthMeans) {
  const int n = 20000;
  std::vector<SimRequest> reqs = Make(AdapterWorkload::kDistinct, n, 8.0);
  EXPECT_NEAR(reqs.back().arrival_s / n, 1 / 8.0, 0.004);
  double prompt = 0, output = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, i);
    if (i > 0) {
      EXPECT_GE(reqs[i].arrival_s, reqs[i - 1].arrival_s);
    }
    EXPECT_GE(reqs[i].prompt_tokens, 4);
    EXPECT_LE(reqs[i].prompt_tokens, 2048);
    prompt += reqs[i].prompt_tokens;
    output += reqs[i].output_tokens;
  }
  // Log-normal means 161 and 338 (clipping at 2048 trims the tail slightly).
  EXPECT_NEAR(prompt / n, 161, 161 * 0.05);
  EXPECT_NEAR(output / n, 338, 338 * 0.05);
}

TEST(Workload, WorkloadsShareArrivalsAndLengths) {
  std::vector<SimRequest> a = Make(AdapterWorkload::kDistinct, 500);
  std::vector<SimRequest> b = Make(AdapterWorkload::kSkewed, 500);
  std::vector<SimRequest> c = Make(AdapterWorkload::kDistinct, 500, 8.0);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_s, b[i].arrival_s);
    EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
    EXPECT_EQ(a[i].output_tokens, b[i].output_tokens);
    EXPECT_NEAR(c[i].arrival_s, a[i].arrival_s / 2, 1e-9);  // twice the rate, same gaps
  }
}

TEST(Workload, RejectsBadOptions) {
  WorkloadOptions o;
  o.arrival_rate = 0;
  EXPECT_EQ(GenerateWorkload(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = WorkloadOptions{};
  o.zipf_alpha = 1.0;
  EXPECT_EQ(GenerateWorkload(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = WorkloadOptions{};
  o.output.min = 0;
  EXPECT_EQ(GenerateWorkload(o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAdapterWorkload("bursty").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseAdapterWorkload("skewed"), AdapterWorkload::kSkewed);
}

TEST(ParseLengthDistribution, FixedUniformLogNormalAndErrors) {
  absl::StatusOr<LengthDistribution> d = ParseLengthDistribution("40");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape, LengthDistribution::kFixed);
  EXPECT_EQ(d->min, 40);
  EXPECT_EQ(d->max, 40);
  d = ParseLengthDistribution("uniform:16:128");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape, LengthDistribution::kUniform);
  EXPECT_EQ(d->mean, 72.0);
  d = ParseLengthDistribution("lognormal:161:1:4:2048");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape, LengthDistribution::kLogNormal);
  EXPECT_EQ(d->sigma, 1.0);
  for (const char* bad : {"", "0", "x", "uniform:5:4", "uniform:0:4", "exp:5:9",
                          "lognormal:1:1:1"}) {
    EXPECT_FALSE(ParseLengthDistribution(bad).ok()) << bad;
  }
}

// Fixed and uniform lengths as loom_bench draws them: fixed is exact; uniform covers
// every value of [A, B] and its sample mean is within 3 standard errors of (A + B) / 2.
TEST(GenerateWorkload, FixedAndUniformLengths) {
  WorkloadOptions o;
  o.num_requests = 4000;
  o.prompt = *ParseLengthDistribution("24");
  o.output = *ParseLengthDistribution("uniform:16:47");
  absl::StatusOr<std::vector<SimRequest>> r = GenerateWorkload(o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<int> seen;
  double sum = 0;
  for (const SimRequest& q : *r) {
    EXPECT_EQ(q.prompt_tokens, 24);
    ASSERT_GE(q.output_tokens, 16);
    ASSERT_LE(q.output_tokens, 47);
    seen.insert(q.output_tokens);
    sum += q.output_tokens;
  }
  EXPECT_EQ(seen.size(), 32u);
  const double sd = std::sqrt((32.0 * 32.0 - 1) / 12.0);  // discrete uniform, 32 values
  EXPECT_NEAR(sum / o.num_requests, 31.5, 3 * sd / std::sqrt(4000.0));
}

// A modulated rate: arrivals in the rising halves of the sine (rate 1 + A sin) against the
// falling halves: expected ratio (1 + 2A/pi) / (1 - 2A/pi) = 3.07 for A = 0.8; the mean
// rate stays `arrival_rate` (n / last arrival within 5%).
TEST(GenerateWorkload, ModulatedRateFollowsTheSine) {
  WorkloadOptions o;
  o.num_requests = 20000;
  o.arrival_rate = 10;
  o.rate_amplitude = 0.8;
  o.rate_period_s = 100;
  absl::StatusOr<std::vector<SimRequest>> r = GenerateWorkload(o);
  ASSERT_TRUE(r.ok()) << r.status();
  int high = 0, low = 0;
  for (const SimRequest& q : *r) {
    (std::fmod(q.arrival_s, 100.0) < 50.0 ? high : low) += 1;
  }
  EXPECT_NEAR(static_cast<double>(high) / low, 3.07, 0.25);
  EXPECT_NEAR(o.num_requests / r->back().arrival_s, 10.0, 0.5);
  o.rate_amplitude = 1.5;
  EXPECT_FALSE(GenerateWorkload(o).ok());
}

}  // namespace
}  // namespace loom
