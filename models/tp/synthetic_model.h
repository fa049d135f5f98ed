// Test helpers: a seeded random Llama model held in memory (any head counts, so that
// tensor-parallel splits SmolLM2 cannot take, e.g. W = 2, 4, can be tested) and a seeded
// random LoRA adapter on all seven projections.
#ifndef LOOM_MODELS_TP_SYNTHETIC_MODEL_H_
#define LOOM_MODELS_TP_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/dtype.h"
#include "models/llama/adapter_weights.h"
#include "models/weights/model_source.h"

namespace loom::testing {

// Every tensor LlamaWeights::Bind needs, for config `c`. Linear layers are stored as
// `linear_dtype` (kF32 or kQ8_0; Q8_0 needs every input width to be a multiple of 32),
// entries ~ N(0, 1/fan_in); embeddings N(0, 1) in F32; norms 1 + N(0, 0.1²).
std::unique_ptr<ModelSource> SyntheticModel(const LlamaConfig& c, DType linear_dtype,
                                            uint32_t seed);

// An F32 copy of the first `n_layers` layers of `src` (embeddings, output and norms
// included; config.n_layers = n_layers): a short real model that runs fast and, being F32,
// has no activation re-quantization to amplify float re-association.
std::unique_ptr<ModelSource> TruncatedF32Copy(const ModelSource& src, int n_layers);

// LoRA pairs of rank `rank` on every projection of every layer: A ~ N(0, 1/h_in),
// B ~ N(0, 1) (both BF16), scale `scale`. Shapes follow the full config `c`.
class RandomLoraAdapter : public AdapterWeights {
 public:
  RandomLoraAdapter(const LlamaConfig& c, int rank, float scale, uint32_t seed);
  const kernels::LoraPair* Pair(int layer, Projection p) const override {
    return &pairs_[static_cast<size_t>(layer) * kNumProjections + static_cast<int>(p)];
  }
  int max_rank() const override { return rank_; }

 private:
  int rank_;
  std::vector<kernels::LoraPair> pairs_;
  std::vector<std::vector<uint16_t>> owned_;
};

}  // namespace loom::testing

#endif  // LOOM_MODELS_TP_SYNTHETIC_MODEL_H_
