// Quantizes every projection of a model with F32 weights, given its calibration
// statistics: per activation, the outlier permutation (by energy) and, with GPTQ, the
// inverse-Hessian factor in permuted order; per projection, the permutation folded into
// the weight (input columns reordered; ffn_gate/ffn_up rows reordered by silu_mul's perm)
// and the linear quantizer.
#ifndef LOOM_MODELS_QUANT_MODEL_QUANTIZER_H_
#define LOOM_MODELS_QUANT_MODEL_QUANTIZER_H_

#include <array>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "models/quant/calibration_stats.h"
#include "models/quant/quant_options.h"
#include "models/quant/quantized_checkpoint.h"
#include "models/weights/model_source.h"

namespace loom::quant {

// The checkpoint's metadata for `o` (scheme, bits, group, outliers, gptq, clip search,
// n_layers); provenance fields are left for the caller.
QuantizedCheckpointMeta MetaFor(const QuantOptions& o, const OutlierCounts& outliers,
                                int n_layers);

// The quantized weights' error on the calibration activations, per projection summed over
// layers: num = sum_r d_r^T H d_r and den = sum_r w_r^T H w_r over every kErrorRowStride-th
// row r, d = w - dequantized(w), H = X^T X (undamped, permuted order). sqrt(num / den) is
// the relative layer-output error ||X (W - Q)^T|| / ||X W^T|| that GPTQ minimises: a
// proxy for comparing settings without a perplexity run. Needs calibration Hessians.
struct OutputErrorStats {
  static constexpr int kErrorRowStride = 8;
  std::array<double, kNumQuantProjections> num{};
  std::array<double, kNumQuantProjections> den{};
};

// One layer of `f32` (every blk.{layer}.* projection F32, [rows, k]). InvalidArgument
// naming the tensor for a missing or non-F32 tensor or a shape that disagrees with the
// statistics; FailedPrecondition when GPTQ is asked for without Hessians.
// With meta.rotation, `orders` (REQUIRED where a rotation outlier count is > 0) fixes the
// permutation of each activation the rotation keeps outliers of (model_rotation.h: the
// residual's for attn_norm and ffn_norm, attn_out's and silu_mul's per layer) instead of
// choosing it from `stats`.
absl::StatusOr<QuantizedLayer> QuantizeLayer(const ModelSource& f32, int layer,
                                             const CalibrationStats& stats,
                                             const QuantizedCheckpointMeta& meta,
                                             const QuantOptions& o,
                                             OutputErrorStats* error = nullptr,
                                             const RotationOrders* orders = nullptr);

// All layers; progress (nullable) after each with (done, total). error (nullable, and
// only filled when the statistics hold Hessians): accumulated over the layers.
absl::StatusOr<std::vector<QuantizedLayer>> QuantizeModel(
    const ModelSource& f32, const CalibrationStats& stats, const QuantizedCheckpointMeta& meta,
    const QuantOptions& o, const std::function<void(int, int)>& progress,
    OutputErrorStats* error = nullptr, const RotationOrders* orders = nullptr);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_MODEL_QUANTIZER_H_
