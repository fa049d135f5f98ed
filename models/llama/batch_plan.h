// The per-step plan: which tokens of which sequences one forward call runs, their
// positions, and each sequence's page list in CSR form. Built once per step and read by
// every layer (and, in later steps of the design, by every LoRA projection).
#ifndef LOOM_MODELS_LLAMA_BATCH_PLAN_H_
#define LOOM_MODELS_LLAMA_BATCH_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/adapter_weights.h"

namespace loom {

// One sequence's part of a step: tokens that go to positions start_pos, start_pos + 1, ...
// A prefill chunk has many tokens, a decode step one.
struct SequenceChunk {
  int32_t kv_seq = -1;            // the sequence's slot in the PagedKvCache
  int32_t start_pos = 0;          // = tokens already in the cache for this sequence
  std::vector<int32_t> tokens;
  // Which tokens need logits: none, the chunk's last (generation), or all (scoring).
  enum class Logits { kNone, kLast, kAll } logits = Logits::kLast;
  // The sequence's LoRA adapter, or nullptr for the base model. Not owned; must stay
  // alive until Forward returns.
  const AdapterWeights* adapter = nullptr;
};

// Tokens [begin, end) of the plan use `adapter` (never nullptr: base-model tokens are in
// no segment and cost nothing extra).
struct AdapterSegment {
  int32_t begin = 0;
  int32_t end = 0;
  const AdapterWeights* adapter = nullptr;
};

// Chunks are laid out grouped by adapter (base-model chunks first, then each adapter's
// chunks contiguously, in order of first appearance) so that every adapter's tokens form
// one contiguous segment for SGMV. Token order inside a chunk is kept.
class BatchPlan {
 public:
  // REQUIRES: every chunk's kv_seq has pages reserved for start_pos + tokens.size()
  // positions; each kv_seq appears at most once; token ids are < vocab_size.
  static absl::StatusOr<BatchPlan> Build(const std::vector<SequenceChunk>& chunks,
                                         const PagedKvCache& kv, int32_t vocab_size);

  int n_tokens() const { return static_cast<int>(tokens_.size()); }
  int n_seqs() const { return static_cast<int>(page_indptr_.size()) - 1; }
  const std::vector<int32_t>& tokens() const { return tokens_; }        // [n_tokens]
  const std::vector<int32_t>& positions() const { return positions_; }  // [n_tokens]
  // Token indices (plan order) whose logits the step returns; logits row i belongs to
  // token logit_tokens()[i].
  const std::vector<int32_t>& logit_tokens() const { return logit_tokens_; }
  // Logits rows of input chunk c (the index into Build's `chunks`): [first, second).
  std::pair<int32_t, int32_t> logit_rows(size_t c) const {
    return {chunk_logit_begin_[c], chunk_logit_end_[c]};
  }
  // Adapter segments over plan token order (see AdapterSegment); empty when no chunk has
  // an adapter.
  const std::vector<AdapterSegment>& adapter_segments() const { return segments_; }
  int max_adapter_rank() const { return max_rank_; }
  int max_position() const { return max_position_; }

  kernels::AttentionBatch attention() const;

 private:
  std::vector<int32_t> tokens_, positions_, seq_of_token_;
  std::vector<int32_t> page_indptr_{0}, page_table_;
  std::vector<int32_t> logit_tokens_;
  std::vector<int32_t> chunk_logit_begin_, chunk_logit_end_;
  std::vector<AdapterSegment> segments_;
  int max_rank_ = 0;
  int max_position_ = 0;
};

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_BATCH_PLAN_H_
