#include "models/sampling/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "models/sampling/penalties.h"

namespace loom {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// NaN -> -inf, +inf -> FLT_MAX, so every later difference (x - max) is well defined.
inline float Sanitize(float x) {
  if (x != x) return kNegInf;
  return std::min(x, FLT_MAX);
}

// Index of the largest value, ties -> lowest index. REQUIRES: !x.empty().
int32_t ArgMax(absl::Span<const float> x) {
  int32_t best = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

// log(sum(exp(x))) of the sanitised x; -inf if every x is -inf.
double LogSumExp(absl::Span<const float> x) {
  float m = kNegInf;
  for (float v : x) m = std::max(m, Sanitize(v));
  if (m == kNegInf) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(Sanitize(v)) - m);
  return m + std::log(sum);
}

}  // namespace

absl::StatusOr<Sampler> Sampler::Create(const SamplingOptions& options) {
  absl::Status status = options.Validate();
  if (!status.ok()) return status;
  uint64_t seed = options.seed;
  if (!options.has_seed) {
    std::random_device device;
    seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
  return Sampler(options, seed);
}

Sampler::Sampler(const SamplingOptions& options, uint64_t seed)
    : options_(options), rng_(seed) {}

double Sampler::NextUniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> history) {
  if (logits.empty()) return -1;
  work_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) work_[i] = Sanitize(logits[i]);
  ApplyPenalties(options_, history, absl::MakeSpan(work_), &window_scratch_);
  if (options_.temperature == 0.0f) return ArgMax(work_);
  return SampleStochastic();
}

int32_t Sampler::SampleStochastic() {
  const size_t vocab = work_.size();
  candidates_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) {
    candidates_[i] = Candidate{work_[i], 0.0f, static_cast<int32_t>(i)};
  }
  // Step 3: top-k. Afterwards the survivors are sorted by (logit desc, id asc).
  bool sorted = false;
  const size_t k = static_cast<size_t>(options_.top_k);
  if (k > 0 && k < vocab) {
    auto by_logit = [](const Candidate& a, const Candidate& b) {
      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    std::nth_element(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                     by_logit);
    candidates_.resize(k);
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
    sorted = true;
  }
  // Step 4: unnormalised softmax; the max gets p = exp(0) = 1 exactly.
  float max_logit = kNegInf;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  if (max_logit == kNegInf) return 0;  // every logit is -inf
  const float t = options_.temperature;
  for (Candidate& c : candidates_) c.p = std::exp((c.logit - max_logit) / t);
  // Tokens whose probability underflowed can never be drawn; dropping them keeps order.
  candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                   [](const Candidate& c) { return c.p == 0.0f; }),
                    candidates_.end());
  // Step 5: top-p.
  if (options_.top_p < 1.0f) KeepTopP(sorted);
  // Step 6: min-p; p_max == 1 (see step 4), so the threshold is min_p itself.
  if (options_.min_p > 0.0f) {
    const float threshold = options_.min_p;
    candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                     [threshold](const Candidate& c) { return c.p < threshold; }),
                      candidates_.end());
  }
  // Step 7: draw.
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.p;
  const double u = NextUniform() * total;
  double cumulative = 0.0;
  for (const Candidate& c : candidates_) {
    cumulative += c.p;
    if (u < cumulative) return c.id;
  }
  return candidates_.back().id;  // u rounded up to total
}

void Sampler::KeepTopP(bool sorted) {
  auto by_p = [](const Candidate& a, const Candidate& b) {
    return a.p > b.p || (a.p == b.p && a.id < b.id);
  };
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.p;
  const double target = static_cast<double>(options_.top_p) * total;
  // Sort only as far as needed: select and sort chunks of 64, 128, 256, ... most likely
  // tokens until the cumulative probability reaches the target.
  const size_t n = candidates_.size();
  size_t begin = 0;
  size_t chunk = 64;
  double cumulative = 0.0;
  while (begin < n) {
    const size_t end = sorted ? n : std::min(n, begin + chunk);
    if (!sorted) {
      if (end < n) {
        std::nth_element(candidates_.begin() + begin, candidates_.begin() + end,
                         candidates_.end(), by_p);
      }
      std::sort(candidates_.begin() + begin, candidates_.begin() + end, by_p);
    }
    for (size_t i = begin; i < end; ++i) {
      cumulative += candidates_[i].p;
      if (cumulative >= target) {
        candidates_.resize(i + 1);
        return;
      }
    }
    begin = end;
    chunk *= 2;
  }
  // Rounding kept the sum just below target: keep everything (now fully sorted).
}

std::vector<std::pair<int32_t, float>> Sampler::TopLogprobs(absl::Span<const float> logits,
                                                            int n) {
  std::vector<std::pair<int32_t, float>> result;
  if (n <= 0 || logits.empty()) return result;
  const double lse = LogSumExp(logits);
  std::vector<std::pair<float, int32_t>> order(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    order[i] = {Sanitize(logits[i]), static_cast<int32_t>(i)};
  }
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const size_t count = std::min(static_cast<size_t>(n), order.size());
  std::partial_sort(order.begin(), order.begin() + count, order.end(), better);
  result.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    // All logits -inf: log_softmax is undefined; report -inf rather than NaN.
    const double logprob = std::isinf(lse) ? lse : order[i].first - lse;
    result.emplace_back(order[i].second, static_cast<float>(logprob));
  }
  return result;
}

float Sampler::TokenLogprob(absl::Span<const float> logits, int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    return -std::numeric_limits<float>::infinity();
  }
  const double lse = LogSumExp(logits);
  return std::isinf(lse) ? -std::numeric_limits<float>::infinity()
                         : static_cast<float>(Sanitize(logits[token]) - lse);
}

}  // namespace loom
