// TensorParallelLlama: a Llama model split over W ranks (models/tp/tp_rank_model.h), each
// rank on its own thread with its own Backend, LoRA kernels, communicator endpoint, KV
// cache shard and workspace. Forward runs one step on all ranks (rank 0 on the calling
// thread) and returns rank 0's full logits.
//
// Supported splits: W divides n_heads, n_kv_heads, intermediate and vocab_size, and the
// per-rank input widths of o (n_heads/W*head_dim) and down (intermediate/W) are whole
// quantization blocks (CheckTensorParallelSplit). SmolLM2-135M (9 heads, 3 kv heads,
// 1536, 49152) splits for W = 1 and 3 only.
//
// Numerics: column-parallel outputs, attention and the logits of each vocab shard are
// computed exactly as on one device; the row-parallel o/down sums are split into W partial
// sums added in rank order, so TP=W differs from TP=1 by float re-association only (and W=1
// is bitwise LlamaModel). The result is deterministic run to run.
//
// After a failed Forward (a communicator error) the group is broken: create a new model.
#ifndef LOOM_MODELS_TP_TENSOR_PARALLEL_LLAMA_H_
#define LOOM_MODELS_TP_TENSOR_PARALLEL_LLAMA_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/lora_ops.h"
#include "models/llama/batch_plan.h"
#include "models/tp/tp_kv_cache.h"
#include "models/tp/tp_rank_model.h"
#include "models/weights/model_source.h"
#include "parallel/communicator.h"

namespace loom {

// The per-rank scratch of one engine thread.
struct TpWorkspaces {
  std::vector<TpWorkspace> ranks;
};

class TensorParallelLlama {
 public:
  // Takes ownership of `source` and `comms` (comms[r].rank() == r, one group of W =
  // comms.size()). backends[r] (and lora[r], when `lora` is not empty) are not owned, must
  // outlive the model and are used only by rank r's thread.
  static absl::StatusOr<std::unique_ptr<TensorParallelLlama>> Create(
      std::unique_ptr<ModelSource> source, std::vector<kernels::Backend*> backends,
      std::vector<kernels::LoraOps*> lora, std::vector<std::unique_ptr<Communicator>> comms);

  const LlamaConfig& config() const { return source_->config(); }
  int world() const { return static_cast<int>(ranks_.size()); }

  // Runs one step on every rank: appends K/V to each rank's cache and writes logits
  // [plan.logit_tokens().size(), vocab]. REQUIRES: plan was built against
  // kv->plan_cache(); kv->world() == world(). Adapters in the plan must be TpAdapters split
  // for world() ranks.
  absl::Status Forward(const BatchPlan& plan, TpKvCache* kv, TpWorkspaces* ws,
                       float* logits) const;

 private:
  TensorParallelLlama() = default;
  std::unique_ptr<ModelSource> source_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::unique_ptr<TpRankModel>> ranks_;
};

}  // namespace loom

#endif  // LOOM_MODELS_TP_TENSOR_PARALLEL_LLAMA_H_
