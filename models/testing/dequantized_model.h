// Test helper: an in-memory copy of a model with every tensor dequantized to F32, so that
// MatMuls run plain F32 activations (no int8 re-quantization) and two F32 models can be
// compared within float tolerance.
#ifndef LOOM_MODELS_TESTING_DEQUANTIZED_MODEL_H_
#define LOOM_MODELS_TESTING_DEQUANTIZED_MODEL_H_

#include <memory>

#include "models/weights/model_source.h"

namespace loom::testing {

// Same config and vocabulary as `q`; tensors in owned F32 buffers, same names and shapes.
std::unique_ptr<ModelSource> DequantizedCopy(const ModelSource& q);

}  // namespace loom::testing

#endif  // LOOM_MODELS_TESTING_DEQUANTIZED_MODEL_H_
