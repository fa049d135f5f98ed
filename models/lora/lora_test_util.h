// Shared test helpers: a tiny GQA Llama config, scratch directories, and reading back an
// adapter's BF16 weights as floats.
#ifndef LOOM_MODELS_LORA_LORA_TEST_UTIL_H_
#define LOOM_MODELS_LORA_LORA_TEST_UTIL_H_

#include <string>
#include <vector>

#include "models/lora/lora_adapter.h"
#include "models/lora/peft_writer.h"
#include "models/model_config.h"

namespace loom::testing {

// hidden 64, intermediate 96, 2 layers, 4 heads, 2 kv heads, head_dim 16 (GQA: k/v 32 wide).
LlamaConfig TinyLoraBase(RopeLayout layout = RopeLayout::kAdjacentPairs);

// A fresh empty directory under TEST_TMPDIR (unique per call).
std::string FreshDir(const std::string& tag);

// Writes `spec` for `base` as a PEFT directory; returns the directory (fails the test on
// error).
std::string WriteTestPeft(const LlamaConfig& base, const SyntheticAdapterSpec& spec,
                          const std::string& tag, SyntheticAdapter* out = nullptr);

// The index of (layer, t) in adapter.projections(), or -1.
int ProjectionIndex(const LoraAdapter& adapter, int layer, LoraTarget t);

}  // namespace loom::testing

#endif  // LOOM_MODELS_LORA_LORA_TEST_UTIL_H_
