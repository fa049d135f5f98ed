// The channel orders of a rotation that keeps outlier channels out (models/rotation/
// model_rotation.h), chosen like Atom's outliers but on the UNROTATED model's calibration
// energies: the channels that carry most of the energy stay in INT8, the rest are rotated.
#ifndef LOOM_MODELS_QUANT_ROTATION_ORDERS_H_
#define LOOM_MODELS_QUANT_ROTATION_ORDERS_H_

#include "absl/status/statusor.h"
#include "models/quant/calibration_stats.h"
#include "models/rotation/model_rotation.h"
#include "models/weights/model_source.h"

namespace loom::quant {

// From `unrotated` (statistics of the model `base`, unrotated; energies suffice):
//   residual: one order for every layer, by the energy of the residual stream's normed
//     rows RMSNorm(x) = (attn_norm / ffn_norm input) / g, i.e. the tap's energies divided
//     by g_j^2, each layer's and norm's share normalised to sum 1, summed over layers;
//   attn_out, silu_mul: per layer, by that activation's energy (OutlierPermutation).
// Orders only where the spec's count is > 0. InvalidArgument when the statistics do not
// fit base's config or a norm scale is missing.
absl::StatusOr<RotationOrders> RotationOrdersFromStats(const CalibrationStats& unrotated,
                                                       const RotationSpec& spec,
                                                       const ModelSource& base);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_ROTATION_ORDERS_H_
