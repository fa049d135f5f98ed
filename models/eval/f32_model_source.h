// A model source with every weight dequantized to F32 in memory (the "FP32 (dequantized
// from the Q4_1 GGUF)" reference of the quantization work): MatMuls then run plain F32
// activations, with no int8 re-quantization of activations.
#ifndef LOOM_MODELS_EVAL_F32_MODEL_SOURCE_H_
#define LOOM_MODELS_EVAL_F32_MODEL_SOURCE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/weights/model_source.h"

namespace loom {

// Same config, vocabulary, tensor names and shapes as `q`; every tensor an owned F32
// buffer (4 bytes per weight: ~540 MB for SmolLM2-135M). InvalidArgument for a tensor
// whose byte size does not match its shape and dtype.
absl::StatusOr<std::unique_ptr<ModelSource>> DequantizeToF32(const ModelSource& q);

}  // namespace loom

#endif  // LOOM_MODELS_EVAL_F32_MODEL_SOURCE_H_
