#include "models/sampling/penalties.h"

#include <algorithm>
#include <cfloat>

namespace loom {

bool PenaltiesAreOff(const SamplingOptions& options) {
  return options.penalty_last_n == 0 ||
         (options.repetition_penalty == 1.0f && options.frequency_penalty == 0.0f &&
          options.presence_penalty == 0.0f);
}

void ApplyPenalties(const SamplingOptions& options, absl::Span<const int32_t> history,
                    absl::Span<float> logits, std::vector<int32_t>* scratch) {
  if (PenaltiesAreOff(options) || history.empty()) return;
  size_t window = history.size();
  if (options.penalty_last_n >= 0) {
    window = std::min(window, static_cast<size_t>(options.penalty_last_n));
  }
  // Sorting a copy of the window groups equal ids: O(w log w), no hash map.
  scratch->assign(history.end() - window, history.end());
  std::sort(scratch->begin(), scratch->end());
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const float r = options.repetition_penalty;
  for (size_t i = 0; i < scratch->size();) {
    const int32_t token = (*scratch)[i];
    size_t j = i;
    while (j < scratch->size() && (*scratch)[j] == token) ++j;
    const float count = static_cast<float>(j - i);
    i = j;
    if (token < 0 || token >= vocab) continue;
    float& logit = logits[token];
    logit = logit > 0.0f ? logit / r : logit * r;
    logit -= count * options.frequency_penalty + options.presence_penalty;
    logit = std::min(logit, FLT_MAX);  // keep +inf out; -inf and NaN pass through
  }
}

}  // namespace loom
