// Folding a ModelRotation (model_rotation.h) into an F32 model, offline: the rotated model
// computes the same function (up to float rounding) with outlier-free activations.
#ifndef LOOM_MODELS_ROTATION_ROTATE_WEIGHTS_H_
#define LOOM_MODELS_ROTATION_ROTATE_WEIGHTS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/rotation/model_rotation.h"
#include "models/weights/model_source.h"

namespace loom {

// Rewrites the seven projections of every layer of `f32` in place by model_rotation.h's
// formulas and sets every attn_norm / ffn_norm scale to 1 (they are folded). Embeddings,
// the final norm and the output head are left as they are. REQUIRES
// rotation.has_folded_norms() (from this same model, before the call). InvalidArgument
// naming the tensor when one is missing, not F32 or not the config's shape.
absl::Status RotateF32Weights(const ModelRotation& rotation, ModelSource* f32);

// ModelRotation::Create for f32's config, SetFoldedNorms(*f32), RotateF32Weights: the
// rotation that `f32` now runs with (LlamaModel::CreateRotated).
absl::StatusOr<std::shared_ptr<const ModelRotation>> RotateF32Model(const RotationSpec& spec,
                                                                    ModelSource* f32,
                                                                    RotationOrders orders = {});

}  // namespace loom

#endif  // LOOM_MODELS_ROTATION_ROTATE_WEIGHTS_H_
