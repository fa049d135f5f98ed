// Where the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) lives once
// scripts/fetch_model.sh has fetched it: $LOOM_MODEL if set, else
// ${LOOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom}/SmolLM2-135M-Instruct.Q4_1.gguf.
#ifndef LOOM_MODELS_DEFAULT_MODEL_H_
#define LOOM_MODELS_DEFAULT_MODEL_H_

#include <cstdlib>
#include <string>

namespace loom {

inline constexpr char kDefaultModelFile[] = "SmolLM2-135M-Instruct.Q4_1.gguf";

inline std::string DefaultModelPath() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  if (std::string m = env("LOOM_MODEL"); !m.empty()) return m;
  std::string cache = env("LOOM_CACHE");
  if (cache.empty()) {
    std::string xdg = env("XDG_CACHE_HOME");
    if (xdg.empty()) {
      std::string home = env("HOME");
      xdg = (home.empty() ? std::string("/root") : home) + "/.cache";
    }
    cache = xdg + "/loom";
  }
  return cache + "/" + kDefaultModelFile;
}

}  // namespace loom

#endif  // LOOM_MODELS_DEFAULT_MODEL_H_
