// Bridges a LoraAdapter (models/lora) to the forward pass's AdapterWeights view.
#ifndef LOOM_SCHEDULER_ENGINE_LORA_ADAPTER_WEIGHTS_H_
#define LOOM_SCHEDULER_ENGINE_LORA_ADAPTER_WEIGHTS_H_

#include "models/llama/adapter_weights.h"
#include "models/lora/lora_adapter.h"

namespace loom {

class LoraAdapterWeights final : public AdapterWeights {
 public:
  // `adapter` must outlive this view (the engine holds an AdapterLease).
  explicit LoraAdapterWeights(const LoraAdapter* adapter) : adapter_(adapter) {}
  const kernels::LoraPair* Pair(int layer, Projection p) const override {
    static_assert(static_cast<int>(Projection::kDown) == static_cast<int>(LoraTarget::kDown));
    return adapter_->Pair(layer, static_cast<LoraTarget>(static_cast<int>(p)));
  }
  int max_rank() const override { return adapter_->max_rank(); }

 private:
  const LoraAdapter* adapter_;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_ENGINE_LORA_ADAPTER_WEIGHTS_H_
