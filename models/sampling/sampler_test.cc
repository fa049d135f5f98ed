#include "models/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

Sampler MakeSampler(const SamplingOptions& options) {
  absl::StatusOr<Sampler> sampler = Sampler::Create(options);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *std::move(sampler);
}

SamplingOptions Seeded(float temperature, uint64_t seed = 1234) {
  SamplingOptions o;
  o.temperature = temperature;
  o.seed = seed;
  o.has_seed = true;
  return o;
}

std::vector<float> RandomLogits(std::mt19937_64* rng, int vocab) {
  std::vector<float> logits(vocab);
  for (float& x : logits) x = static_cast<float>(static_cast<int64_t>((*rng)() % 20001) - 10000) / 1000.0f;
  return logits;
}

// Reference softmax of logits / t in double.
std::vector<double> Softmax(const std::vector<float>& logits, double t) {
  const double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((logits[i] - m) / t);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<int> Histogram(Sampler* sampler, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[sampler->Sample(logits, {})];
  return counts;
}

// Pearson chi-square of counts against probabilities (cells with p == 0 must be empty).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& p, int draws) {
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double e = draws * p[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

std::set<int> Observed(const std::vector<int>& counts) {
  std::set<int> s;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) s.insert(static_cast<int>(i));
  }
  return s;
}

std::vector<float> LogsOf(const std::vector<double>& p) {
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  return logits;
}

TEST(SamplerTest, CreateRejectsInvalidOptions) {
  SamplingOptions o;
  o.top_p = 0;
  EXPECT_EQ(Sampler::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SamplerTest, GreedyIsArgmax) {
  std::mt19937_64 rng(7);
  Sampler sampler = MakeSampler(SamplingOptions());
  for (int trial = 0; trial < 100; ++trial) {
    const std::vector<float> logits = RandomLogits(&rng, 1000);
    const int expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(sampler.Sample(logits, {}), expected);
  }
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
  Sampler sampler = MakeSampler(SamplingOptions());
  EXPECT_EQ(sampler.Sample(std::vector<float>{1, 3, 0, 3, 2}, {}), 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{5, 5, 5}, {}), 0);
}

TEST(SamplerTest, TopK1IsGreedyForAnyTemperature) {
  std::mt19937_64 rng(11);
  for (float t : {0.01f, 0.5f, 1.0f, 7.0f, 100.0f}) {
    SamplingOptions o = Seeded(t);
    o.top_k = 1;
    Sampler sampler = MakeSampler(o);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> logits = RandomLogits(&rng, 300);
      if (trial % 2 == 0) logits[299] = logits[17] = *std::max_element(logits.begin(), logits.end());
      const int expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
      EXPECT_EQ(sampler.Sample(logits, {}), expected) << "t=" << t;
    }
  }
}

// Chi-square with 4 degrees of freedom: P(chi2 > 25) ~ 5e-5, so a correct sampler passes
// and a biased one (e.g. off-by-one cumulative, wrong temperature) fails by far.
TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {0.3f, -1.2f, 1.5f, 0.0f, 0.9f};
  const int kDraws = 200000;
  for (float t : {1.0f, 0.5f, 2.0f}) {
    Sampler sampler = MakeSampler(Seeded(t, 99));
    const std::vector<int> counts = Histogram(&sampler, logits, kDraws);
    EXPECT_LT(ChiSquare(counts, Softmax(logits, t), kDraws), 25.0) << "t=" << t;
  }
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingP) {
  // Probabilities by id: 0.1, 0.4, 0.2, 0.3. Sorted: id1 0.4, id3 0.3 (cum 0.7),
  // id2 0.2 (cum 0.9), id0 0.1 (cum 1.0).
  const std::vector<float> logits = LogsOf({0.1, 0.4, 0.2, 0.3});
  struct Case {
    float top_p;
    std::vector<double> kept;  // renormalised by hand
  };
  const Case cases[] = {
      {0.35f, {0, 1, 0, 0}},
      {0.65f, {0, 0.4 / 0.7, 0, 0.3 / 0.7}},
      {0.75f, {0, 0.4 / 0.9, 0.2 / 0.9, 0.3 / 0.9}},
      {0.95f, {0.1, 0.4, 0.2, 0.3}},
  };
  const int kDraws = 40000;
  for (const Case& c : cases) {
    SamplingOptions o = Seeded(1.0f, 5);
    o.top_p = c.top_p;
    Sampler sampler = MakeSampler(o);
    const std::vector<int> counts = Histogram(&sampler, logits, kDraws);
    std::set<int> expected_set;
    for (int i = 0; i < 4; ++i) {
      if (c.kept[i] > 0) expected_set.insert(i);
    }
    EXPECT_EQ(Observed(counts), expected_set) << "top_p=" << c.top_p;
    EXPECT_LT(ChiSquare(counts, c.kept, kDraws), 25.0) << "top_p=" << c.top_p;
  }
}

// A flat-ish distribution over 1000 shuffled ids needs several selection rounds
// (64, 128, 256, ...); the kept set must equal a full-sort reference.
TEST(SamplerTest, TopPOnLargeVocabMatchesFullSortReference) {
  const int kVocab = 1000;
  std::vector<int> ids(kVocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(3));
  std::vector<float> logits(kVocab);
  for (int rank = 0; rank < kVocab; ++rank) logits[ids[rank]] = -0.002f * rank;
  const double top_p = 0.5;
  const std::vector<double> p = Softmax(logits, 1.0);
  std::set<int> expected;
  double cumulative = 0;
  for (int rank = 0; rank < kVocab && cumulative < top_p; ++rank) {
    cumulative += p[ids[rank]];
    expected.insert(ids[rank]);
  }
  ASSERT_GT(expected.size(), 256u);  // really exercises several rounds
  SamplingOptions o = Seeded(1.0f, 8);
  o.top_p = static_cast<float>(top_p);
  Sampler sampler = MakeSampler(o);
  EXPECT_EQ(Observed(Histogram(&sampler, logits, 100000)), expected);
}

TEST(SamplerTest, TopKKeepsKBestWithSoftmaxWeights) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.0f, 1.5f, 0.0f};
  SamplingOptions o = Seeded(0.8f, 21);
  o.top_k = 3;  // ids 1, 4, 3
  Sampler sampler = MakeSampler(o);
  const int kDraws = 60000;
  const std::vector<int> counts = Histogram(&sampler, logits, kDraws);
  std::vector<float> kept_logits = {2.0f, 1.5f, 1.0f};
  const std::vector<double> q = Softmax(kept_logits, 0.8);
  const std::vector<double> expected = {0, q[0], 0, q[2], q[1], 0};
  EXPECT_EQ(Observed(counts), (std::set<int>{1, 3, 4}));
  EXPECT_LT(ChiSquare(counts, expected, kDraws), 25.0);
}

TEST(SamplerTest, TopKThenTopP) {
  // top_k 3 keeps p ~ (0.4, 0.3, 0.2)/0.9; top_p 0.7 of that keeps ids 1 and 3.
  const std::vector<float> logits = LogsOf({0.1, 0.4, 0.2, 0.3});
  SamplingOptions o = Seeded(1.0f, 4);
  o.top_k = 3;
  o.top_p = 0.7f;
  Sampler sampler = MakeSampler(o);
  EXPECT_EQ(Observed(Histogram(&sampler, logits, 20000)), (std::set<int>{1, 3}));
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfMax) {
  // p = 0.5, 0.3, 0.15, 0.05 (+ a 5th token with p ~ 1e-22 that min-p always drops).
  // min_p 0.2 -> threshold 0.1 keeps {0, 1, 2}; min_p 0.5 -> threshold 0.25 keeps {0, 1};
  // min_p 1 keeps only the max. Checked on all three code paths: full vocabulary,
  // after top-k (4 of 5), and after top-p (0.999 keeps the 4 likely tokens).
  std::vector<float> logits = LogsOf({0.5, 0.3, 0.15, 0.05});
  logits.push_back(-50.0f);
  const struct {
    float min_p;
    std::vector<double> kept;
  } cases[] = {
      {0.2f, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0, 0}},
      {0.5f, {0.5 / 0.8, 0.3 / 0.8, 0, 0, 0}},
      {1.0f, {1, 0, 0, 0, 0}},
  };
  const int kDraws = 40000;
  for (int path = 0; path < 3; ++path) {
    for (const auto& c : cases) {
      SamplingOptions o = Seeded(1.0f, 6 + path);
      o.min_p = c.min_p;
      if (path == 1) o.top_k = 4;
      if (path == 2) o.top_p = 0.999f;
      Sampler sampler = MakeSampler(o);
      const std::vector<int> counts = Histogram(&sampler, logits, kDraws);
      EXPECT_LT(ChiSquare(counts, c.kept, kDraws), 25.0) << "min_p=" << c.min_p << " path " << path;
    }
  }
}

TEST(SamplerTest, RepetitionPenaltyFlipsGreedy) {
  SamplingOptions o;
  o.repetition_penalty = 1.1f;
  Sampler sampler = MakeSampler(o);
  const std::vector<int32_t> history = {0};
  // Positive logit divided: 2.0 / 1.1 = 1.818 < 1.9.
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.9f, 0.0f}, {}), 0);
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.9f, 0.0f}, history), 1);
  // ... but 2.0 / 1.1 > 1.8 keeps token 0.
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.8f, 0.0f}, history), 0);
  // Negative logit multiplied: -1.0 * 1.1 = -1.1 < -1.05.
  EXPECT_EQ(sampler.Sample(std::vector<float>{-1.0f, -1.05f, -5.0f}, history), 1);
  // Token 2 in history does not touch token 0.
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.9f, 0.0f}, std::vector<int32_t>{2}), 0);
}

TEST(SamplerTest, FrequencyPenaltyScalesWithCount) {
  SamplingOptions o;
  o.frequency_penalty = 0.04f;
  Sampler sampler = MakeSampler(o);
  const std::vector<float> logits = {2.0f, 1.9f};
  // count 2: 2 - 0.08 = 1.92 > 1.9; count 3: 2 - 0.12 = 1.88 < 1.9.
  EXPECT_EQ(sampler.Sample(logits, std::vector<int32_t>{0, 1, 0}), 0);
  EXPECT_EQ(sampler.Sample(logits, std::vector<int32_t>{0, 0, 0}), 1);
}

TEST(SamplerTest, PresencePenaltyIgnoresCount) {
  SamplingOptions o;
  o.presence_penalty = 0.15f;
  Sampler sampler = MakeSampler(o);
  // Token 0: 2 - 0.15 = 1.85 < 1.9 regardless of count; token 1 once: 1.75.
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.9f}, std::vector<int32_t>{0}), 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.8f}, std::vector<int32_t>{0, 0, 0, 0}),
            0);
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.9f}, std::vector<int32_t>{0, 1}), 0);
}

TEST(SamplerTest, PenaltyWindowCoversOnlyLastN) {
  SamplingOptions o;
  o.presence_penalty = 1.0f;
  o.penalty_last_n = 2;
  Sampler sampler = MakeSampler(o);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  EXPECT_EQ(sampler.Sample(logits, std::vector<int32_t>{0, 2, 2}), 0);  // 0 outside window
  EXPECT_EQ(sampler.Sample(logits, std::vector<int32_t>{2, 0, 2}), 1);  // 0 inside
}

TEST(SamplerTest, PenaltiesApplyBeforeStochasticSampling) {
  // Presence 100 makes token 0 impossible at temperature 1.
  SamplingOptions o = Seeded(1.0f, 2);
  o.presence_penalty = 100.0f;
  Sampler sampler = MakeSampler(o);
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  for (int i = 0; i < 1000; ++i) EXPECT_NE(sampler.Sample(logits, std::vector<int32_t>{0}), 0);
}

std::vector<int32_t> Draw(uint64_t seed, const SamplingOptions& base, int n) {
  SamplingOptions o = base;
  o.seed = seed;
  o.has_seed = true;
  Sampler sampler = MakeSampler(o);
  std::mt19937_64 rng(77);  // same logits sequence for every seed
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(sampler.Sample(RandomLogits(&rng, 2000), tokens));
  return tokens;
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDifferent) {
  SamplingOptions plain;
  plain.temperature = 3.0f;
  SamplingOptions filtered = plain;
  filtered.top_p = 0.9f;
  filtered.top_k = 500;
  filtered.min_p = 0.01f;
  filtered.repetition_penalty = 1.2f;
  for (const SamplingOptions& o : {plain, filtered}) {
    const std::vector<int32_t> a = Draw(42, o, 100);
    EXPECT_EQ(a, Draw(42, o, 100));
    EXPECT_NE(a, Draw(43, o, 100));
    EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 10u);  // really random
  }
}

// The documented derivation: u = (mt19937_64(seed)() >> 11) * 2^-53, token = first id
// whose cumulative (unnormalised) probability exceeds u * total. With three equal logits
// every p is exactly 1, so the token is floor(3u).
TEST(SamplerTest, DrawFollowsDocumentedUniformDerivation) {
  const uint64_t kSeed = 0x5eed;
  Sampler sampler = MakeSampler(Seeded(1.0f, kSeed));
  std::mt19937_64 reference(kSeed);
  const std::vector<float> logits = {0.25f, 0.25f, 0.25f};
  for (int i = 0; i < 300; ++i) {
    const double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    EXPECT_EQ(sampler.Sample(logits, {}), static_cast<int32_t>(std::floor(u * 3))) << i;
  }
}

// A request migrated after k tokens resumes with skip_draws = k and the same logits and
// history from there on: its tokens are the tail of the uninterrupted run, for every
// sampling path (full vocabulary, top-k, top-p, min-p, penalties) and also across a row
// whose logits are all -inf (which must still consume its draw).
TEST(SamplerTest, SkipDrawsResumesTheSameSequence) {
  const float inf = std::numeric_limits<float>::infinity();
  SamplingOptions plain = Seeded(2.0f, 99);
  SamplingOptions filtered = plain;
  filtered.top_p = 0.9f;
  filtered.min_p = 0.01f;
  filtered.repetition_penalty = 1.3f;
  SamplingOptions topk = plain;
  topk.top_k = 300;
  const int kTotal = 60;
  for (const SamplingOptions& o : {plain, filtered, topk}) {
    std::mt19937_64 logits_rng(5);
    std::vector<std::vector<float>> rows;
    for (int i = 0; i < kTotal; ++i) rows.push_back(RandomLogits(&logits_rng, 1500));
    rows[10].assign(1500, -inf);
    std::vector<int32_t> whole;  // the uninterrupted run
    {
      Sampler sampler = MakeSampler(o);
      std::vector<int32_t> history = {7, 8, 9};
      for (int i = 0; i < kTotal; ++i) {
        whole.push_back(sampler.Sample(rows[i], history));
        history.push_back(whole.back());
      }
    }
    for (int k : {1, 10, 11, 37}) {
      // Resume at k: a fresh sampler that skips k draws, fed rows k.. with the history
      // of the uninterrupted run.
      SamplingOptions r = o;
      r.skip_draws = static_cast<uint64_t>(k);
      Sampler resumed = MakeSampler(r);
      std::vector<int32_t> history = {7, 8, 9};
      history.insert(history.end(), whole.begin(), whole.begin() + k);
      std::vector<int32_t> tail;
      for (int i = k; i < kTotal; ++i) {
        tail.push_back(resumed.Sample(rows[i], history));
        history.push_back(tail.back());
      }
      EXPECT_EQ(tail, std::vector<int32_t>(whole.begin() + k, whole.end())) << "k=" << k;
    }
    // Without the skip the resumed run diverges (the test can fail).
    SamplingOptions r = o;
    Sampler fresh = MakeSampler(r);
    std::vector<int32_t> history = {7, 8, 9};
    history.insert(history.end(), whole.begin(), whole.begin() + 37);
    std::vector<int32_t> tail;
    for (int i = 37; i < kTotal; ++i) {
      tail.push_back(fresh.Sample(rows[i], history));
      history.push_back(tail.back());
    }
    EXPECT_NE(tail, std::vector<int32_t>(whole.begin() + 37, whole.end()));
  }
}

TEST(SamplerTest, SeedlessSamplersDiffer) {
  SamplingOptions o;
  o.temperature = 1.0f;
  Sampler a = MakeSampler(o);
  Sampler b = MakeSampler(o);
  const std::vector<float> logits(5000, 0.0f);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 100; ++i) {
    ta.push_back(a.Sample(logits, {}));
    tb.push_back(b.Sample(logits, {}));
  }
  EXPECT_NE(ta, tb);
}

TEST(SamplerTest, DegenerateLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Sampler greedy = MakeSampler(SamplingOptions());
  Sampler random = MakeSampler(Seeded(1.0f));
  EXPECT_EQ(greedy.Sample({}, {}), -1);
  EXPECT_EQ(random.Sample({}, {}), -1);
  EXPECT_EQ(greedy.Sample(std::vector<float>{nan, 1.0f, 0.0f}, {}), 1);
  EXPECT_EQ(random.Sample(std::vector<float>{-inf, -inf, -inf}, {}), 0);
  EXPECT_EQ(random.Sample(std::vector<float>{0.0f, inf, 3.0f}, {}), 1);
  for (int i = 0; i < 1000; ++i) {
    const int32_t t = random.Sample(std::vector<float>{nan, 0.0f, -inf, 0.0f}, {});
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  // Top-k scan: NaN never enters, +inf ties at FLT_MAX and ids break the tie.
  SamplingOptions o = Seeded(1.0f);
  o.top_k = 2;
  Sampler top2 = MakeSampler(o);
  const std::vector<float> odd = {nan, 1.0f, inf, inf, -inf, inf, nan};
  std::set<int32_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(top2.Sample(odd, {}));
  EXPECT_EQ(seen, (std::set<int32_t>{2, 3}));
  o.top_k = 3;
  Sampler top3 = MakeSampler(o);
  EXPECT_EQ(top3.Sample(std::vector<float>{nan, nan, nan, nan}, {}), 0);
  const auto top = Sampler::TopLogprobs(std::vector<float>{nan, 2.0f, nan, 1.0f}, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].second, -inf);  // a NaN token, as -inf
}

TEST(SamplerTest, TopLogprobsAreLogSoftmaxOfRawLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -0.5f};
  double sum = 0;
  for (float x : logits) sum += std::exp(x);
  const double lse = std::log(sum);
  const auto top = Sampler::TopLogprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);  // tie with id 3 -> lower id first
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].first, 2);
  EXPECT_NEAR(top[0].second, 3.0 - lse, 1e-6);
  EXPECT_NEAR(top[2].second, 2.0 - lse, 1e-6);
  EXPECT_NEAR(Sampler::TokenLogprob(logits, 4), -0.5 - lse, 1e-6);
  EXPECT_EQ(Sampler::TokenLogprob(logits, 5), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(Sampler::TopLogprobs(logits, 0).empty());
  const auto all = Sampler::TopLogprobs(logits, 100);
  ASSERT_EQ(all.size(), logits.size());
  double total = 0;
  for (const auto& [id, lp] : all) total += std::exp(lp);
  EXPECT_NEAR(total, 1.0, 1e-6);
}

}  // namespace
}  // namespace loom
