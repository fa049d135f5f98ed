// Seeded synthetic LoRA adapters for tests and benchmarks, written in real PEFT format
// (adapter_config.json + adapter_model.safetensors) or as a llama.cpp GGUF-LoRA file.
//
// Magnitudes: A ~ N(0, 1/sqrt(h_in)) per element (rows of norm ~1), B ~ N(0, sigma) with
//   sigma = relative_magnitude * base_row_norm / (scale * sqrt(rank)),
// so every row of the update scale * B A has norm ~ relative_magnitude * base_row_norm
// (A's rows are nearly orthogonal). Measured on SmolLM2-135M Q4_1 with llama.cpp (rank 8,
// all seven projections, greedy): 0.02 and the default 0.05 change the continuation while
// it stays fluent; 0.2 turns it into word salad. base_row_norm is the measured mean row
// norm of the base projection when known (make_test_adapter measures it), else the
// Llama init value 0.02 * sqrt(h_in).
#ifndef LOOM_MODELS_LORA_PEFT_WRITER_H_
#define LOOM_MODELS_LORA_PEFT_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"
#include "models/lora/lora_adapter.h"
#include "models/model_config.h"

namespace loom {

struct SyntheticAdapterSpec {
  int rank = 8;
  float alpha = 16.0f;
  bool use_rslora = false;
  std::vector<LoraTarget> targets = {std::begin(kAllLoraTargets), std::end(kAllLoraTargets)};
  std::vector<int> layers;           // empty: every layer of the base
  uint64_t seed = 1;
  DType dtype = DType::kF32;         // kF32, kF16 or kBF16 (as written to the files)
  float relative_magnitude = 0.05f;
  std::map<LoraTarget, float> base_row_norm;  // per target; missing: 0.02 * sqrt(h_in)
  std::string base_model_name = "HuggingFaceTB/SmolLM2-135M-Instruct";
};

// The adapter's weights in Hugging Face row order, as float values exactly representable
// in spec.dtype (already rounded), so writers and tests agree bit for bit.
struct SyntheticAdapter {
  struct Projection {
    int layer = 0;
    LoraTarget target = LoraTarget::kQ;
    int h_in = 0, h_out = 0;
    std::vector<float> a;  // [rank, h_in]
    std::vector<float> b;  // [h_out, rank]
  };
  SyntheticAdapterSpec spec;
  LlamaConfig base;
  float scale = 1.0f;  // alpha / rank, or alpha / sqrt(rank) with rsLoRA
  std::vector<Projection> projections;  // by layer, then target
};

// InvalidArgument for a bad spec (rank < 1, layer out of range, dtype not a float type,
// empty targets) or an invalid base config.
absl::StatusOr<SyntheticAdapter> MakeSyntheticAdapter(const LlamaConfig& base,
                                                      const SyntheticAdapterSpec& spec);

// Creates `dir` (and parents) and writes adapter_config.json and adapter_model.safetensors.
absl::Status WritePeftAdapter(const SyntheticAdapter& adapter, const std::string& dir);

// Writes the same adapter as a llama.cpp GGUF-LoRA file (general.type "adapter",
// adapter.type "lora", adapter.lora.alpha; blk.N.<stem>.weight.lora_a / .lora_b in
// spec.dtype) in GGUF row order: the B rows of q and k are permuted from HF to GGUF order
// (models/weights/qk_permutation.h). llama.cpp has no rsLoRA: with use_rslora the alpha
// written is alpha * sqrt(rank) so that alpha / rank gives the same scale.
absl::Status WriteGgufLora(const SyntheticAdapter& adapter, const std::string& path);

// PEFT's name of a projection's module inside the model: "model.layers.N.self_attn.q_proj".
std::string PeftModulePath(int layer, LoraTarget t);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_PEFT_WRITER_H_
