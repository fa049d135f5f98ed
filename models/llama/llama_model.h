// A Llama-architecture model (GQA, RMSNorm, rope, SwiGLU, tied or untied output) running
// on a kernels::Backend over a paged KV cache. One Forward call runs a whole step: prefill
// chunks and decode tokens of many sequences, described by one BatchPlan.
//
// Quantized mode (CreateQuantized): the seven linear layers of every layer run as Atom
// quantized linears (kernels/quant/atom_format.h) on AtomKernels; everything else
// (embedding, norms' weights, attention, output head) as in the unquantized model (the
// head optionally as an INT8 Atom linear: UseInt8Head). Per layer:
//   RmsNormQuantize(x, attn_norm.perm) -> q, k, v     (LoRA reads the permuted normed rows)
//   attention (original order) -> Quantize(attn_out.perm) -> o
//   RmsNormQuantize(x, ffn_norm.perm) -> gate, up     (outputs in silu_mul.perm order)
//   SiluMulQuantize -> down
// The residual stream stays in the original channel order. Adapters must be permuted to the
// model's channel orders first (models/lora/adapter_permutation.h): lora_A input columns
// like the base weight's, gate/up lora_B rows by silu_mul.perm. The unquantized path is
// unchanged by all this.
//
// Rotated mode (QuaRot, models/rotation/model_rotation.h; CreateRotated for F32 weights
// with the rotation folded in, or a rotated quantized checkpoint): embedding rows are
// rotated as they are looked up (x_r = R e), the layer norms run with unit scale, the
// attention output and SiLU*mul output get their online Hadamard (M_o, M_d) before o and
// down (fused with reorder + quantize in the quantized mode, where gate/up rows keep the
// original order and silu_mul.perm applies after M_d), and the rows that need logits are
// rotated back (x = Rᵀ x_r) before the final norm. Adapters must be rotated first
// (models/lora/adapter_rotation.h). Activation taps see the rotated activations.
#ifndef LOOM_MODELS_LLAMA_LLAMA_MODEL_H_
#define LOOM_MODELS_LLAMA_LLAMA_MODEL_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/lora_ops.h"
#include "kernels/quant/atom_format.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/batch_plan.h"
#include "models/llama/llama_weights.h"
#include "models/llama/quantized_head.h"
#include "models/llama/quantized_weights.h"
#include "models/llama/step_profile.h"
#include "models/rotation/model_rotation.h"
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
  // Quantized mode only:
  kernels::quant::AtomActivations atom;  // the current linear input, quantized
  std::vector<float> xp;       // [T, n_heads * head_dim] attention output, permuted
  std::vector<float> ffh;      // [T, intermediate] SiLU(gate)*up, in silu_mul order
  std::vector<float> rotated;  // [T, hidden] rotated mode: the residual's rotated channels
  ActivationTap* tap = nullptr;  // not owned; null = no observation (the normal case)
  StepProfile* profile = nullptr;  // not owned; null = not timed (the normal case)
};

class LlamaModel {
 public:
  // Takes ownership of `source`. `backend` (and `lora`, when given) must outlive the model.
  // Without `lora`, a plan that names adapters is refused.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      std::unique_ptr<ModelSource> source, kernels::Backend* backend,
      kernels::LoraOps* lora = nullptr);

  // The rotated mode on unquantized weights: `source` holds a model with `rotation`
  // folded in (models/rotation/rotate_weights.h). InvalidArgument for a null rotation or
  // one for another hidden width.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> CreateRotated(
      std::unique_ptr<ModelSource> source, std::shared_ptr<const ModelRotation> rotation,
      kernels::Backend* backend, kernels::LoraOps* lora = nullptr);

  // The quantized mode: `quantized` replaces the seven linears of every layer (validated
  // against source's config: InvalidArgument on any mismatch); `atom` runs them. `backend`
  // still runs everything else; `atom` (and `lora`) must outlive the model.
  // Activation taps are not observed in this mode.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> CreateQuantized(
      std::unique_ptr<ModelSource> source, QuantizedWeights quantized,
      kernels::Backend* backend, kernels::quant::AtomKernels* atom,
      kernels::LoraOps* lora = nullptr);

  // Quantized mode only: runs the output head as an INT8 Atom linear from now on
  // (models/llama/quantized_head.h), requantized from the stored output matrix.
  // FailedPrecondition for an unquantized model. Not thread-safe with Forward.
  absl::Status UseInt8Head();
  bool int8_head() const { return head_.has_value(); }

  // The rotation the model runs with (a rotated checkpoint's, or CreateRotated's), or
  // nullptr.
  const ModelRotation* rotation() const { return rotation_.get(); }

  // The quantized linears, or nullptr for an unquantized model.
  const QuantizedWeights* quantized() const { return quant_ ? &*quant_ : nullptr; }
  kernels::quant::QuantScheme scheme() const {
    return quant_ ? quant_->scheme : kernels::quant::QuantScheme::kNone;
  }

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
  // x [n, hidden] <- R x (transpose: Rᵀ x) in a rotated model.
  void RotateResidual(float* x, int n, bool transpose, ForwardWorkspace* ws) const;
  // The layer norm's scale: stored, or ones in a rotated model.
  const float* NormScale(const std::vector<float>& stored) const;
  // Rope of ws->q/k, K/V append and paged attention into ws->attn (both modes).
  void RopeAndAttend(int layer, const BatchPlan& plan, PagedKvCache* kv,
                     ForwardWorkspace* ws) const;
  // ws->x += ws->proj over n tokens.
  void AddResidual(int n, ForwardWorkspace* ws) const;
  void Attention(int layer, const BatchPlan& plan, PagedKvCache* kv, ForwardWorkspace* ws) const;
  void FeedForward(int layer, const BatchPlan& plan, ForwardWorkspace* ws) const;
  void QuantAttention(int layer, const BatchPlan& plan, PagedKvCache* kv,
                      ForwardWorkspace* ws) const;
  void QuantFeedForward(int layer, const BatchPlan& plan, ForwardWorkspace* ws) const;
  // Sets every quantized linear's view.prepared from atom_->Prepare (at creation).
  void PrepareQuantizedLinears();

  std::unique_ptr<ModelSource> source_;
  LlamaWeights weights_;
  kernels::Backend* backend_;
  kernels::LoraOps* lora_;
  std::shared_ptr<const ModelRotation> rotation_;  // null: not rotated
  std::optional<QuantizedWeights> quant_;
  kernels::quant::AtomKernels* atom_ = nullptr;
  std::optional<QuantizedHead> head_;  // set by UseInt8Head
  // The Atom kernels' own layouts of the linears (AtomKernels::Prepare; the views'
  // `prepared` point here; null entries where the kernels have none) and of the INT8 head.
  std::vector<std::unique_ptr<kernels::quant::PreparedAtomWeight>> prepared_;
  std::unique_ptr<kernels::quant::PreparedAtomWeight> head_prepared_;
};

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_LLAMA_MODEL_H_
