// Binds quantized linears to a model: from a checkpoint directory (models/quant's
// loom-atom overlay) or from in-memory layers in the checkpoint's layout (tests, and the
// quantizer before it writes).
#ifndef LOOM_MODELS_LLAMA_QUANTIZED_LOADER_H_
#define LOOM_MODELS_LLAMA_QUANTIZED_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"
#include "models/llama/quantized_weights.h"
#include "models/quant/quantized_checkpoint.h"
#include "models/weights/model_source.h"

namespace loom {

// Opens the checkpoint in `dir` and binds it for `base` (the model file the checkpoint
// overlays). FailedPrecondition when the checkpoint was made for another model: its shapes
// differ from base's config, or the base file's size (and, when verify_sha256, its sha256)
// differs from the recorded one, or (a rotated checkpoint) the rotation rebuilt here has
// another fingerprint. Other errors as QuantizedCheckpoint::Open. The result owns the
// checkpoint; a rotated one's rotation carries base's norm scales (for adapters).
absl::StatusOr<QuantizedWeights> LoadQuantizedWeights(const std::string& dir,
                                                      const ModelSource& base,
                                                      bool verify_sha256 = false);

// Views over `layers` (which the result co-owns) for `scheme`, folded with `rotation`
// (null: none; it must hold the folded norms for adapters to be rotated). Not validated:
// pass the result to LlamaModel::CreateQuantized (which validates against the model config).
QuantizedWeights QuantizedWeightsFromLayers(
    std::shared_ptr<const std::vector<quant::QuantizedLayer>> layers,
    kernels::quant::QuantScheme scheme, std::shared_ptr<const ModelRotation> rotation = nullptr);

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_QUANTIZED_LOADER_H_
