// Where tests find the default model (SmolLM2-135M-Instruct Q4_1 GGUF) fetched by
// scripts/fetch_model.sh; see models/default_model.h.
#ifndef LOOM_MODELS_TESTING_TEST_MODEL_H_
#define LOOM_MODELS_TESTING_TEST_MODEL_H_

#include <string>

#include "models/default_model.h"

namespace loom::testing {

inline std::string DefaultModelPath() { return loom::DefaultModelPath(); }

}  // namespace loom::testing

#endif  // LOOM_MODELS_TESTING_TEST_MODEL_H_
