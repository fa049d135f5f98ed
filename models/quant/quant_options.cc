#include "models/quant/quant_options.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace loom::quant {

std::array<int, kNumQuantActivations> ActivationWidths(const LlamaConfig& c) {
  return {c.hidden, c.n_heads * c.head_dim, c.hidden, c.intermediate};
}

absl::StatusOr<OutlierCounts> ResolveOutlierCounts(const std::array<int, kNumQuantActivations>& k,
                                                   const QuantOptions& o) {
  if (o.scheme == kernels::quant::QuantScheme::kNone) {
    return absl::InvalidArgumentError("quantize: scheme 'none' has nothing to quantize");
  }
  const int g = o.group_size;
  if (g <= 0 || g % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group size ", g, " must be positive and even"));
  }
  OutlierCounts out{};
  for (int a = 0; a < kNumQuantActivations; ++a) {
    const char* name = QuantActivationName(static_cast<QuantActivation>(a));
    if (g > k[a]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group size ", g, " does not fit activation ", name, " (", k[a], " channels)"));
    }
    int n = o.outliers[a];
    const bool automatic = n < 0;
    if (automatic) n = k[a] % g != 0 ? k[a] % g : o.default_outliers;
    if (n < 0 || n >= k[a] || (k[a] - n) % g != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          automatic ? "default " : "", "outlier count ", n, " for ", name, " (", k[a],
          " channels) leaves ", k[a] - n, " normal channels, not a positive multiple of the group size ", g,
          "; use a count c with (", k[a], " - c) % ", g, " == 0, e.g. ", k[a] % g));
    }
    out[a] = n;
  }
  return out;
}

absl::Status ValidateClipSearch(const ClipSearchMeta& c) {
  if (!(c.min_ratio > 0 && c.min_ratio <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip search min_ratio ", c.min_ratio, " is not in (0, 1]"));
  }
  if (c.steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("clip search steps ", c.steps, " < 1"));
  }
  return absl::OkStatus();
}

absl::Status ValidateGptqOptions(const QuantOptions& o) {
  if (!(o.gptq_damp >= 0 && o.gptq_damp < 1e6)) {
    return absl::InvalidArgumentError(absl::StrCat("GPTQ damping ", o.gptq_damp,
                                                   " must be finite and >= 0"));
  }
  if (!o.gptq && (o.gptq_act_order || o.gptq_static_groups || o.gptq_hessian_scale_search ||
                  o.refit_scales)) {
    return absl::InvalidArgumentError(
        "gptq_act_order, gptq_static_groups, gptq_hessian_scale_search and refit_scales need "
        "--gptq");
  }
  if (o.gptq_hessian_scale_search && (o.gptq_act_order || o.gptq_static_groups)) {
    return absl::InvalidArgumentError(
        "gptq_hessian_scale_search works in the natural order with dynamic groups: drop "
        "gptq_act_order / gptq_static_groups");
  }
  return absl::OkStatus();
}

absl::Status ValidateOutlierSelection(const std::string& s) {
  if (s == "energy" || s == "owq") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("outlier selection '", s, "' is not 'energy' or 'owq'"));
}

}  // namespace loom::quant
