// A LoRA adapter split to match the tensor-parallel base model (models/tp/tp_weights.h).
//
// Scheme (S-LoRA's alignment of LoRA with the Megatron split, with the row-parallel
// LoRA fused into the base layer's all-reduce so LoRA adds no communication):
//   column-parallel q/k/v/gate/up (base output rows split): A [rank, h_in] replicated,
//     B sharded by output rows (rank r: rows [r*h_out/W, ...)). Each rank computes the
//     whole shrink v = x·Aᵀ (x is replicated; rank is small) and expands only its rows:
//     its output shard is exactly the TP=1 result for those rows.
//   row-parallel o/down (base input columns split): A sharded by input columns
//     (rank r: columns [r*h_in/W, ...) of every row), B [h_out, rank] replicated. Rank r
//     computes v_r = x_r·A_rᵀ and adds scale·v_r·Bᵀ to its PARTIAL output; the base
//     layer's AllReduceSum then yields Σ_r(base_r + scale·v_r·Bᵀ) = base + scale·(Σ v_r)·Bᵀ,
//     i.e. the full LoRA term, by linearity.
// Views for B rows and replicated matrices; owned copies for the A column shards.
#ifndef LOOM_MODELS_TP_TP_ADAPTER_H_
#define LOOM_MODELS_TP_TP_ADAPTER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/lora_ops.h"
#include "models/llama/adapter_weights.h"
#include "models/model_config.h"

namespace loom {

// One rank's view of an adapter.
class TpAdapterShard : public AdapterWeights {
 public:
  const kernels::LoraPair* Pair(int layer, Projection p) const override {
    const kernels::LoraPair& q = pairs_[static_cast<size_t>(layer) * kNumProjections +
                                        static_cast<int>(p)];
    return q.rank > 0 ? &q : nullptr;
  }
  int max_rank() const override { return max_rank_; }

 private:
  friend class TpAdapter;
  std::vector<kernels::LoraPair> pairs_;  // [layer][projection]; rank 0 = absent
  std::vector<std::vector<uint16_t>> owned_;
  int max_rank_ = 0;
};

// The whole adapter (Pair() forwards to `full`, so a single-device LlamaModel can run the
// same object) plus one shard per rank. Plans for TensorParallelLlama name TpAdapters.
class TpAdapter : public AdapterWeights {
 public:
  // `full` is not owned and must outlive the result; `c` is the FULL model config.
  static absl::StatusOr<std::unique_ptr<TpAdapter>> Create(const AdapterWeights* full,
                                                           const LlamaConfig& c, int world);

  const kernels::LoraPair* Pair(int layer, Projection p) const override {
    return full_->Pair(layer, p);
  }
  int max_rank() const override { return full_->max_rank(); }

  int world() const { return static_cast<int>(shards_.size()); }
  const TpAdapterShard& shard(int rank) const { return shards_[rank]; }

 private:
  explicit TpAdapter(const AdapterWeights* full) : full_(full) {}
  const AdapterWeights* full_;
  std::vector<TpAdapterShard> shards_;
};

}  // namespace loom

#endif  // LOOM_MODELS_TP_TP_ADAPTER_H_
