// Repetition / frequency / presence penalties over a window of recent tokens.
#ifndef LOOM_MODELS_SAMPLING_PENALTIES_H_
#define LOOM_MODELS_SAMPLING_PENALTIES_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "models/sampling/sampling_options.h"

namespace loom {

// True when `options` changes no logit (repetition 1, frequency 0, presence 0, or an empty
// window), so callers may skip ApplyPenalties.
bool PenaltiesAreOff(const SamplingOptions& options);

// Penalises, in place, the logits of tokens that occur in the window: the last
// options.penalty_last_n entries of `history` (all of it for -1, none for 0).
// For each distinct token t in the window, occurring count(t) > 0 times:
//   1. repetition: logit = logit > 0 ? logit / r : logit * r        (llama.cpp / HF)
//   2. logit -= count(t) * frequency_penalty + presence_penalty      (OpenAI)
//   3. a result above FLT_MAX becomes FLT_MAX (so +inf never appears; -inf/NaN stay)
// logits: [vocab]; history ids outside [0, vocab) are ignored. `scratch` is reused storage
// (its contents are overwritten) so the per-token call does not allocate.
// REQUIRES: options.Validate() is OK.
void ApplyPenalties(const SamplingOptions& options, absl::Span<const int32_t> history,
                    absl::Span<float> logits, std::vector<int32_t>* scratch);

}  // namespace loom

#endif  // LOOM_MODELS_SAMPLING_PENALTIES_H_
