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
// differs from the recorded one. Other errors as QuantizedCheckpoint::Open. The result owns
// the checkpoint.
absl::StatusOr<QuantizedWeights> LoadQuantizedWeights(const std::string& dir,
                                                      const ModelSource& base,
                                                      bool verify_sha256 = false);

// Views over `layers` (which the result co-owns) for `scheme`. Not validated: pass the
// result to LlamaModel::CreateQuantized (which validates against the model config).
QuantizedWeights QuantizedWeightsFromLayers(
    std::shared_ptr<const std::vector<quant::QuantizedLayer>> layers,
    kernels::quant::QuantScheme scheme);

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_QUANTIZED_LOADER_H_
