// One rank of a tensor-parallel Llama: the forward pass of models/llama/llama_model.cc on a
// TpShard, with the communicator joining the shards. Per layer:
//   x (replicated) -> RmsNorm -> q/k/v shard (own heads) -> rope -> own KV cache ->
//   attention over own heads -> o shard (partial [T, hidden]) -> AllReduceSum -> x +=
//   x -> RmsNorm -> gate/up shard -> SiLU·up -> down shard (partial) -> AllReduceSum -> x +=
// and at the end RmsNorm -> vocab shard of the output -> AllGather -> logits.
// Two all-reduces of [T, hidden] per layer and one gather of [L, vocab] per step.
// With W = 1 the sequence of kernel calls is LlamaModel's, so logits are bitwise equal.
#ifndef LOOM_MODELS_TP_TP_RANK_MODEL_H_
#define LOOM_MODELS_TP_TP_RANK_MODEL_H_

#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "kernels/lora_ops.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/batch_plan.h"
#include "models/tp/tp_adapter.h"
#include "models/tp/tp_weights.h"
#include "parallel/communicator.h"

namespace loom {

// Scratch of one rank (caller-owned, grown to the largest step; no allocation once warm).
struct TpWorkspace {
  std::vector<float> x, xn;        // [T, hidden] residual stream (replicated), normed
  std::vector<float> q, attn;      // [T, n_heads/W * head_dim]
  std::vector<float> k, v;         // [T, n_kv_heads/W * head_dim]
  std::vector<float> proj;         // [T, hidden] partial sums, then reduced
  std::vector<float> gate, up;     // [T, intermediate/W]
  std::vector<float> last;         // [L, hidden]
  std::vector<float> logits_shard; // [L, vocab/W]
  std::vector<float> gathered;     // [W, L, vocab/W]
  kernels::ActivationPack pack;
  std::vector<float> lora_v;       // [T, max_rank]
  std::vector<kernels::LoraSegment> lora_segs;
  std::vector<const TpAdapterShard*> seg_shards;  // this rank's shard per plan segment
};

class TpRankModel {
 public:
  // `full` is the whole model's config; backend, lora (may be null: no adapters) and comm
  // are not owned and are used only from the thread that calls Forward.
  TpRankModel(const LlamaConfig& full, TpShard shard, kernels::Backend* backend,
              kernels::LoraOps* lora, Communicator* comm)
      : config_(full), local_(RankConfig(full, shard.world)), shard_(std::move(shard)),
        backend_(backend), lora_(lora), comm_(comm) {}

  int rank() const { return shard_.rank; }
  int world() const { return shard_.world; }
  const LlamaConfig& rank_config() const { return local_; }

  // This rank's part of one step: appends its heads' K/V to `kv` (a cache sized by
  // rank_config()) and, when `logits` is not null, writes the full logits
  // [plan.logit_tokens().size(), vocab]. Every rank of the group must call Forward with the
  // same plan. Plan errors (adapters that are not TpAdapters of this world size, no LoRA
  // kernels, KV geometry) are found before any collective, identically on every rank;
  // communicator errors are returned as they are.
  absl::Status Forward(const BatchPlan& plan, PagedKvCache* kv, TpWorkspace* ws,
                       float* logits) const;

  // The plan checks of Forward alone (no collective): KV geometry, adapters, LoRA kernels.
  absl::Status Check(const BatchPlan& plan, const PagedKvCache& kv) const;

 private:
  absl::Status Prepare(const BatchPlan& plan, const PagedKvCache& kv, TpWorkspace* ws) const;
  void ApplyLora(const BatchPlan& plan, int layer, Projection p, const float* x, int h_in,
                 int h_out, float* y, TpWorkspace* ws) const;
  absl::Status Attention(int layer, const BatchPlan& plan, PagedKvCache* kv,
                         TpWorkspace* ws) const;
  absl::Status FeedForward(int layer, const BatchPlan& plan, TpWorkspace* ws) const;
  absl::Status Logits(const BatchPlan& plan, TpWorkspace* ws, float* logits) const;

  const LlamaConfig config_;  // full model
  const LlamaConfig local_;   // this rank's heads / intermediate
  const TpShard shard_;
  kernels::Backend* backend_;
  kernels::LoraOps* lora_;
  Communicator* comm_;
};

}  // namespace loom

#endif  // LOOM_MODELS_TP_TP_RANK_MODEL_H_
