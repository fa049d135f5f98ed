// Per-request token sampler: logits of one position -> one token id.
#ifndef LOOM_MODELS_SAMPLING_SAMPLER_H_
#define LOOM_MODELS_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/sampling/sampling_options.h"

namespace loom {

// Sample() applies, in this order (llama.cpp-like):
//   1. penalties (penalties.h) over the window of `history`;
//   2. temperature == 0: argmax of the penalised logits, ties -> lowest id; done;
//   3. top-k: keep the k largest logits (ties -> lower id first);
//   4. softmax of logit / temperature over the survivors;
//   5. top-p: keep the smallest prefix, by descending probability, whose cumulative
//      probability is >= top_p (always at least one token);
//   6. min-p: drop tokens with p < min_p * p_max (the most likely token always stays);
//   7. renormalise and draw one token with a uniform double from the generator.
// NaN logits are treated as -inf and +inf as the largest float. If every logit is -inf
// the result is token 0.
//
// Determinism: with has_seed, the generator is std::mt19937_64(seed), advanced by
// options.skip_draws, and the uniform double is (next() >> 11) * 2^-53; the token is the first candidate whose cumulative
// unnormalised probability exceeds u * total. Candidates are walked in id order (no top-k /
// top-p) or sorted by (p or logit desc, id asc), never in an order left to the standard
// library, so the same seed and the same sequence of logits and histories give the same
// tokens with any standard library (probabilities come from libm's expf). Every Sample()
// with temperature > 0 consumes exactly one draw (also when every logit is -inf), greedy
// ones none: after k sampled tokens, a sampler created with skip_draws = k continues the
// sequence exactly (request migration).
//
// Cost per call, vocab V: greedy O(V) (no copy unless penalties apply); top-k O(V) scan
// with a k-heap; top-p O(V) (expf per token + a 1017-bucket histogram) plus a sort of only
// the buckets that reach top_p; no full sort of V except in a rounding fallback.
//
// Thread safety: none; one Sampler belongs to one request on the engine thread.
class Sampler {
 public:
  // InvalidArgument if options.Validate() fails.
  static absl::StatusOr<Sampler> Create(const SamplingOptions& options);

  Sampler(Sampler&&) = default;
  Sampler& operator=(Sampler&&) = default;

  // logits: [vocab] raw logits of the next position (vocab >= 1; empty -> returns -1).
  // history: prompt + generated token ids so far, oldest first (for penalties only).
  // Returns a token id in [0, vocab).
  int32_t Sample(absl::Span<const float> logits, absl::Span<const int32_t> history);

  // The n most likely tokens under log_softmax(logits) of the RAW logits (before
  // penalties and temperature), best first, ties -> lower id first. Returns
  // min(n, vocab) pairs {token id, log-probability}; n <= 0 -> empty. NaN logits count as
  // -inf; if every logit is -inf every log-probability is -inf.
  static std::vector<std::pair<int32_t, float>> TopLogprobs(absl::Span<const float> logits,
                                                            int n);

  // log_softmax(logits)[token] of the RAW logits (same convention as TopLogprobs);
  // -inf if token is outside [0, vocab).
  static float TokenLogprob(absl::Span<const float> logits, int32_t token);

  const SamplingOptions& options() const { return options_; }

 private:
  struct Candidate {
    float logit;
    float p;  // unnormalised probability exp((logit - max) / temperature)
    int32_t id;
  };

  Sampler(const SamplingOptions& options, uint64_t seed);

  // Uniform double in [0, 1) with 53 random bits.
  double NextUniform();
  // The k best of Sanitize(x) into *out, sorted by (logit desc, id asc); p left 0.
  // REQUIRES: k <= x.size().
  static void SelectTopK(absl::Span<const float> x, size_t k, std::vector<Candidate>* out);
  // Steps 3-7 when top-k is active (0 < k < vocab). x: [vocab] penalised logits.
  int32_t SampleTopK(absl::Span<const float> x, size_t k);
  // Steps 4-7 over the whole vocabulary. x: [vocab] penalised logits.
  int32_t SampleFullVocab(absl::Span<const float> x);
  // Step 5 over probs_: fills candidates_ with the kept tokens, sorted by (p desc, id asc).
  // x: [vocab] penalised logits; total: sum of probs_.
  void SelectTopP(absl::Span<const float> x, double total);
  // Step 5 over candidates_ already sorted by descending p.
  void TruncateTopP();
  // Step 6 over candidates_ already sorted by descending p.
  void TruncateMinP();
  // Step 7 over candidates_ (non-empty).
  int32_t DrawCandidate();

  SamplingOptions options_;
  std::mt19937_64 rng_;
  // Scratch reused across calls so that Sample() does not allocate in steady state.
  std::vector<float> work_;              // [vocab] penalised logits (when penalties apply)
  std::vector<float> probs_;             // [vocab] unnormalised probabilities (full path)
  std::vector<Candidate> candidates_;    // survivors of top-k / top-p, sorted best first
  std::vector<double> bucket_mass_;      // top-p histogram, see SelectTopP
  std::vector<int32_t> window_scratch_;  // penalties.h scratch
};

}  // namespace loom

#endif  // LOOM_MODELS_SAMPLING_SAMPLER_H_
