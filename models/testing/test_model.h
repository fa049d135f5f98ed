// Where tests find the default model (SmolLM2-135M-Instruct Q4_1 GGUF) fetched by
// scripts/fetch_model.sh: $LOOM_MODEL, else $HOME/.cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf.
#ifndef LOOM_MODELS_TESTING_TEST_MODEL_H_
#define LOOM_MODELS_TESTING_TEST_MODEL_H_

#include <cstdlib>
#include <string>

namespace loom::testing {

inline std::string DefaultModelPath() {
  if (const char* m = std::getenv("LOOM_MODEL"); m != nullptr && *m != '\0') return m;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace loom::testing

#endif  // LOOM_MODELS_TESTING_TEST_MODEL_H_
