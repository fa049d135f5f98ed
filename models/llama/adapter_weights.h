// What the forward pass needs from a LoRA adapter: for each layer and projection, the
// kernel view of its A/B pair (or nullptr when the adapter does not touch that
// projection). models/lora/LoraAdapter implements it; the model does not know formats.
#ifndef LOOM_MODELS_LLAMA_ADAPTER_WEIGHTS_H_
#define LOOM_MODELS_LLAMA_ADAPTER_WEIGHTS_H_

#include "kernels/lora_ops.h"

namespace loom {

// The seven projections of a Llama layer, in PEFT order.
enum class Projection : int { kQ = 0, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumProjections = 7;

class AdapterWeights {
 public:
  virtual ~AdapterWeights() = default;
  // nullptr when this adapter has no LoRA on (layer, p).
  virtual const kernels::LoraPair* Pair(int layer, Projection p) const = 0;
  // The largest rank over all pairs (sizes the shrink intermediate).
  virtual int max_rank() const = 0;
};

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_ADAPTER_WEIGHTS_H_
