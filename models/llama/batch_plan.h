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

namespace loom {

// One sequence's part of a step: tokens that go to positions start_pos, start_pos + 1, ...
// A prefill chunk has many tokens, a decode step one.
struct SequenceChunk {
  int32_t kv_seq = -1;            // the sequence's slot in the PagedKvCache
  int32_t start_pos = 0;          // = tokens already in the cache for this sequence
  std::vector<int32_t> tokens;
  // Which tokens need logits: none, the chunk's last (generation), or all (scoring).
  enum class Logits { kNone, kLast, kAll } logits = Logits::kLast;
};

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
  // Token indices whose logits the step returns, in chunk order; logits row i belongs to
  // token logit_tokens()[i].
  const std::vector<int32_t>& logit_tokens() const { return logit_tokens_; }
  // Range of logits rows of chunk c: [logit_indptr()[c], logit_indptr()[c + 1]).
  const std::vector<int32_t>& logit_indptr() const { return logit_indptr_; }
  int max_position() const { return max_position_; }

  kernels::AttentionBatch attention() const;

 private:
  std::vector<int32_t> tokens_, positions_, seq_of_token_;
  std::vector<int32_t> page_indptr_{0}, page_table_;
  std::vector<int32_t> logit_tokens_, logit_indptr_{0};
  int max_position_ = 0;
};

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_BATCH_PLAN_H_
