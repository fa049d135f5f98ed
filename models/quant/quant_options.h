// What the quantizer is asked to do, and the checks that refuse what it cannot do.
#ifndef LOOM_MODELS_QUANT_QUANT_OPTIONS_H_
#define LOOM_MODELS_QUANT_QUANT_OPTIONS_H_

#include <array>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"
#include "models/model_config.h"
#include "models/quant/quantized_checkpoint.h"

namespace loom::quant {

struct QuantOptions {
  kernels::quant::QuantScheme scheme = kernels::quant::QuantScheme::kW4A4;
  int group_size = 128;
  // Per activation (QuantActivation order); -1 = automatic: k % group_size when that is
  // non-zero (SmolLM2's 576 -> 64), else default_outliers (1536 -> 128).
  OutlierCounts outliers = {-1, -1, -1, -1};
  int default_outliers = 128;
  ClipSearchMeta clip_search;
  bool gptq = false;
  double gptq_damp = 0.01;  // times the mean of diag(H), added to the diagonal
  bool gptq_act_order = false;        // gptq.h: normal columns by descending diag(H)
  bool gptq_static_groups = false;    // gptq.h: group scales fixed before the sweep
  bool gptq_hessian_scale_search = false;  // gptq.h: GPTQ-loss scale search per group
  bool w4_full_range = false;  // 4-bit weight codes in [-8, 7] instead of [-7, 7]
  bool refit_scales = false;   // scale_refit.h after the codes are chosen (needs Hessians)
  // Which channels become outliers: "energy" (Atom: highest sum x^2) or "owq" (highest
  // energy * low-bit weight error, channel_permutation.h OwqScores).
  std::string outlier_selection = "energy";
  // QuaRot: fold this rotation into the model before calibration (the checkpoint is then
  // version 2, models/rotation/model_rotation.h); unset = no rotation.
  std::optional<RotationSpec> rotation;
  int threads = 1;
};

// Input channels of each activation (QuantActivation order): hidden, n_heads * head_dim,
// hidden, intermediate.
std::array<int, kNumQuantActivations> ActivationWidths(const LlamaConfig& c);

// The outlier count of every activation, or InvalidArgument naming the activation when:
// the scheme is kNone; the group is not positive and even or wider than an activation; a
// count is outside [0, k) or leaves k - count not a multiple of the group; the automatic
// default does so.
absl::StatusOr<OutlierCounts> ResolveOutlierCounts(const std::array<int, kNumQuantActivations>& k,
                                                   const QuantOptions& o);

// InvalidArgument unless min_ratio in (0, 1] and steps >= 1 (steps == 1 means RTN).
absl::Status ValidateClipSearch(const ClipSearchMeta& c);

// InvalidArgument for a GPTQ refinement (or refit_scales, which needs the Hessians) without
// --gptq, a damping < 0 or not finite, or
// the Hessian scale search combined with act order or static groups (it needs each
// group's columns contiguous in the sweep and the scale chosen when the sweep gets there).
absl::Status ValidateGptqOptions(const QuantOptions& o);

// InvalidArgument unless outlier_selection is "energy" or "owq".
absl::Status ValidateOutlierSelection(const std::string& s);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_QUANT_OPTIONS_H_
