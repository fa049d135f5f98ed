// A Llama-architecture model (GQA, RMSNorm, rope, SwiGLU, tied or untied output) running
// on a kernels::Backend over a paged KV cache. One Forward call runs a whole step: prefill
// chunks and decode tokens of many sequences, described by one BatchPlan.
#ifndef LOOM_MODELS_LLAMA_LLAMA_MODEL_H_
#define LOOM_MODELS_LLAMA_LLAMA_MODEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/lora_ops.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/batch_plan.h"
#include "models/llama/llama_weights.h"
#include "models/weights/model_source.h"

namespace loom {

// Where a quantizable activation is produced in a layer (the inputs of the linear layers):
// kAttnNorm feeds q/k/v, kAttnOut feeds o, kFfnNorm feeds gate/up, kSiluMul feeds down.
enum class TapPoint { kAttnNorm, kAttnOut, kFfnNorm, kSiluMul };

// Optional observer of those activations (calibration, e.g. models/quant). Called on the
// Forward thread with x [n, k] in the model's original channel order.
class ActivationTap {
 public:
  virtual ~ActivationTap() = default;
  virtual void Observe(int layer, TapPoint point, const float* x, int n, int k) = 0;
};

// Scratch memory of Forward, owned by the caller (one per engine thread) and grown to the
// largest step seen; no allocation once warm.
struct ForwardWorkspace {
  std::vector<float> x;        // [T, hidden] residual stream
  std::vector<float> xn;       // [T, hidden] normed
  std::vector<float> q;        // [T, n_heads * head_dim]
  std::vector<float> k, v;     // [T, n_kv_heads * head_dim]
  std::vector<float> attn;     // [T, n_heads * head_dim]
  std::vector<float> proj;     // [T, hidden]
  std::vector<float> gate, up; // [T, intermediate]
  std::vector<float> last;     // [L, hidden] rows that need logits
  kernels::ActivationPack pack;
  std::vector<float> lora_v;   // [T, max_rank] LoRA shrink intermediate
  std::vector<kernels::LoraSegment> lora_segs;
  ActivationTap* tap = nullptr;  // not owned; null = no observation (the normal case)
};

class LlamaModel {
 public:
  // Takes ownership of `source`. `backend` (and `lora`, when given) must outlive the model.
  // Without `lora`, a plan that names adapters is refused.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      std::unique_ptr<ModelSource> source, kernels::Backend* backend,
      kernels::LoraOps* lora = nullptr);

  const LlamaConfig& config() const { return source_->config(); }
  const ModelSource& source() const { return *source_; }
  kernels::Backend* backend() const { return backend_; }
  kernels::LoraOps* lora_ops() const { return lora_; }

  // Runs one step. Appends the K/V of every token of `plan` to `kv` and writes
  // logits [plan.logit_tokens().size(), vocab] row-major to `logits`.
  // REQUIRES: plan was built against `kv`.
  absl::Status Forward(const BatchPlan& plan, PagedKvCache* kv, ForwardWorkspace* ws,
                       float* logits) const;

 private:
  LlamaModel(std::unique_ptr<ModelSource> source, LlamaWeights weights,
             kernels::Backend* backend, kernels::LoraOps* lora)
      : source_(std::move(source)), weights_(std::move(weights)), backend_(backend),
        lora_(lora) {}

  // y [T, h_out] += each adapter segment's LoRA of projection p applied to x [T, h_in].
  void ApplyLora(const BatchPlan& plan, int layer, Projection p, const float* x, int h_in,
                 int h_out, float* y, ForwardWorkspace* ws) const;

  void Embed(const BatchPlan& plan, float* x) const;
  void Attention(int layer, const BatchPlan& plan, PagedKvCache* kv, ForwardWorkspace* ws) const;
  void FeedForward(int layer, const BatchPlan& plan, ForwardWorkspace* ws) const;

  std::unique_ptr<ModelSource> source_;
  LlamaWeights weights_;
  kernels::Backend* backend_;
  kernels::LoraOps* lora_;
};

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_LLAMA_MODEL_H_
