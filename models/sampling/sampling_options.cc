#include "models/sampling/sampling_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace loom {
namespace {

absl::Status Bad(const char* field, double value, const char* requirement) {
  return absl::InvalidArgumentError(
      absl::StrCat("sampling option ", field, " = ", value, " is invalid: ", requirement));
}

}  // namespace

absl::Status SamplingOptions::Validate() const {
  // Written as !(in range) so that NaN fails every check.
  if (!(temperature >= 0.0f && temperature <= 100.0f)) {
    return Bad("temperature", temperature, "must be in [0, 100]");
  }
  if (top_k < 0) return Bad("top_k", top_k, "must be >= 0 (0 = off)");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Bad("top_p", top_p, "must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Bad("min_p", min_p, "must be in [0, 1]");
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)) {
    return Bad("repetition_penalty", repetition_penalty, "must be finite and > 0");
  }
  if (!std::isfinite(frequency_penalty)) {
    return Bad("frequency_penalty", frequency_penalty, "must be finite");
  }
  if (!std::isfinite(presence_penalty)) {
    return Bad("presence_penalty", presence_penalty, "must be finite");
  }
  if (penalty_last_n < -1) {
    return Bad("penalty_last_n", penalty_last_n, "must be >= -1 (-1 = whole history)");
  }
  return absl::OkStatus();
}

}  // namespace loom
