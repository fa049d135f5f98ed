#include "models/sampling/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
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

// Largest value of x, NaN skipped; -inf if there is none. Eight independent running
// maxima let the compiler vectorise the scan.
float MaxValue(absl::Span<const float> x) {
  float lane[8];
  std::fill(lane, lane + 8, kNegInf);
  size_t i = 0;
  for (; i + 8 <= x.size(); i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float best = kNegInf;
  for (; i < x.size(); ++i) best = x[i] > best ? x[i] : best;
  for (int j = 0; j < 8; ++j) best = lane[j] > best ? lane[j] : best;
  return best;
}

// Index of the largest value, ties -> lowest index; NaN never wins; 0 if none is > -inf.
int32_t ArgMax(absl::Span<const float> x) {
  const float best = MaxValue(x);
  if (best == kNegInf) return 0;
  size_t i = 0;
  while (x[i] != best) ++i;
  return static_cast<int32_t>(i);
}

// Bits of a float; for p >= 0 they order like p itself.
inline uint32_t Bits(float p) {
  uint32_t u;
  std::memcpy(&u, &p, sizeof(u));
  return u;
}

// log(sum(exp(x))) of the sanitised x; -inf if every x is -inf.
double LogSumExp(absl::Span<const float> x) {
  const float m = std::min(MaxValue(x), FLT_MAX);
  if (m == kNegInf) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (float v : x) sum += std::exp(Sanitize(v) - m);
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
    : options_(options), rng_(seed) {
  rng_.discard(options.skip_draws);
}

double Sampler::NextUniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> history) {
  if (logits.empty()) return -1;
  absl::Span<const float> x = logits;
  if (!PenaltiesAreOff(options_) && !history.empty()) {
    // A plain copy: every later step tolerates NaN / +inf (ArgMax skips NaN, the others
    // read through Sanitize).
    work_.resize(logits.size());
    std::memcpy(work_.data(), logits.data(), logits.size() * sizeof(float));
    ApplyPenalties(options_, history, absl::MakeSpan(work_), &window_scratch_);
    x = work_;
  }
  if (options_.temperature == 0.0f) return ArgMax(x);
  const size_t k = static_cast<size_t>(options_.top_k);
  if (k > 0 && k < x.size()) return SampleTopK(x, k);
  return SampleFullVocab(x);
}

void Sampler::SelectTopK(absl::Span<const float> x, size_t k, std::vector<Candidate>* out) {
  // One scan with a heap of the k best seen so far (worst on top); most tokens are
  // rejected by a single comparison with the top.
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  out->clear();
  size_t i = 0;
  for (; i < x.size() && out->size() < k; ++i) {
    out->push_back(Candidate{Sanitize(x[i]), 0.0f, static_cast<int32_t>(i)});
    std::push_heap(out->begin(), out->end(), better);
  }
  float worst = out->empty() ? FLT_MAX : out->front().logit;
  for (; i < x.size(); ++i) {
    // Ids only grow, so a tie with the worst kept logit never wins; NaN fails the test.
    if (!(x[i] > worst)) continue;
    const Candidate c{Sanitize(x[i]), 0.0f, static_cast<int32_t>(i)};
    if (!better(c, out->front())) continue;  // +inf sanitised to a tie with FLT_MAX
    std::pop_heap(out->begin(), out->end(), better);
    out->back() = c;
    std::push_heap(out->begin(), out->end(), better);
    worst = out->front().logit;
  }
  std::sort_heap(out->begin(), out->end(), better);  // best first
}

int32_t Sampler::SampleTopK(absl::Span<const float> x, size_t k) {
  SelectTopK(x, k, &candidates_);
  // Step 4; the best gets p = exp(0) = 1.
  const float max_logit = candidates_.front().logit;
  if (max_logit == kNegInf) {  // every logit is -inf; the draw is still consumed
    NextUniform();
    return candidates_.front().id;
  }
  const float t = options_.temperature;
  for (Candidate& c : candidates_) c.p = std::exp((c.logit - max_logit) / t);
  if (options_.top_p < 1.0f) TruncateTopP();
  if (options_.min_p > 0.0f) TruncateMinP();
  return DrawCandidate();
}

int32_t Sampler::SampleFullVocab(absl::Span<const float> x) {
  const size_t vocab = x.size();
  const float max_logit = std::min(MaxValue(x), FLT_MAX);  // == max of Sanitize(x)
  if (max_logit == kNegInf) {  // every logit is -inf; the draw is still consumed
    NextUniform();
    return 0;
  }
  // Step 4; the max gets p = exp(0) = 1.
  const float t = options_.temperature;
  probs_.resize(vocab);
  double total = 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    probs_[i] = std::exp((Sanitize(x[i]) - max_logit) / t);
    total += probs_[i];
  }
  if (options_.top_p < 1.0f) {
    SelectTopP(x, total);
    if (options_.min_p > 0.0f) TruncateMinP();
    return DrawCandidate();
  }
  // No top-p: steps 6-7 directly over probs_ in id order. p_max == 1, so the min-p
  // threshold is min_p itself.
  const float threshold = options_.min_p;
  if (threshold > 0.0f) {
    total = 0.0;
    for (float p : probs_) total += p >= threshold ? p : 0.0f;
  }
  const double u = NextUniform() * total;
  double cumulative = 0.0;
  int32_t last = 0;
  for (size_t i = 0; i < vocab; ++i) {
    if (probs_[i] == 0.0f || probs_[i] < threshold) continue;
    last = static_cast<int32_t>(i);
    cumulative += probs_[i];
    if (u < cumulative) return last;
  }
  return last;  // u rounded up to total
}

void Sampler::SelectTopP(absl::Span<const float> x, double total) {
  // Bucket every p > 0 by its top 12 bits (exponent + 3 mantissa bits): buckets order
  // like p. Walking buckets from the top finds bucket b where the mass reaches the
  // target; only tokens in buckets >= b (a prefix of the sorted order) are then sorted.
  constexpr uint32_t kShift = 20;
  const size_t buckets = (Bits(1.0f) >> kShift) + 1;
  bucket_mass_.assign(buckets, 0.0);
  for (float p : probs_) bucket_mass_[Bits(p) >> kShift] += p;  // p in [0, 1]
  const double target = static_cast<double>(options_.top_p) * total;
  double above = 0.0;
  size_t b = buckets - 1;
  for (; b > 0; --b) {
    if (above + bucket_mass_[b] >= target) break;
    above += bucket_mass_[b];
  }
  for (uint32_t min_bucket : {static_cast<uint32_t>(b), 0u}) {
    candidates_.clear();
    for (size_t i = 0; i < probs_.size(); ++i) {
      const float p = probs_[i];
      if (p > 0.0f && (Bits(p) >> kShift) >= min_bucket) {
        candidates_.push_back(Candidate{Sanitize(x[i]), p, static_cast<int32_t>(i)});
      }
    }
    std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& x, const Candidate& y) {
      return x.p > y.p || (x.p == y.p && x.id < y.id);
    });
    double cumulative = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cumulative += candidates_[i].p;
      if (cumulative >= target) {
        candidates_.resize(i + 1);
        return;
      }
    }
    // Summation order left the prefix just short of the target: retry with everything
    // (and, if that also falls short by rounding, keep everything).
  }
}

void Sampler::TruncateTopP() {
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.p;
  const double target = static_cast<double>(options_.top_p) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += candidates_[i].p;
    if (cumulative >= target) {
      candidates_.resize(i + 1);
      return;
    }
  }
}

void Sampler::TruncateMinP() {
  // p_max == 1 (the best token), so the threshold is min_p itself; the best stays.
  const float threshold = options_.min_p;
  size_t keep = 1;
  while (keep < candidates_.size() && candidates_[keep].p >= threshold) ++keep;
  candidates_.resize(keep);
}

int32_t Sampler::DrawCandidate() {
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

std::vector<std::pair<int32_t, float>> Sampler::TopLogprobs(absl::Span<const float> logits,
                                                            int n) {
  std::vector<std::pair<int32_t, float>> result;
  if (n <= 0 || logits.empty()) return result;
  const double lse = LogSumExp(logits);
  std::vector<Candidate> best;
  SelectTopK(logits, std::min(static_cast<size_t>(n), logits.size()), &best);
  result.reserve(best.size());
  for (const Candidate& c : best) {
    // All logits -inf: log_softmax is undefined; report -inf rather than NaN.
    const double logprob = std::isinf(lse) ? lse : c.logit - lse;
    result.emplace_back(c.id, static_cast<float>(logprob));
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
