#include "models/llama/batch_plan.h"

#include <set>

#include "absl/strings/str_format.h"

namespace loom {

absl::StatusOr<BatchPlan> BatchPlan::Build(const std::vector<SequenceChunk>& chunks,
                                           const PagedKvCache& kv, int32_t vocab_size) {
  BatchPlan plan;
  std::set<int32_t> seen;
  const int page = kv.page_size();
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& ch = chunks[c];
    if (!seen.insert(ch.kv_seq).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("batch plan: sequence %d appears twice", ch.kv_seq));
    }
    const int64_t end = static_cast<int64_t>(ch.start_pos) + ch.tokens.size();
    const auto& pages = kv.Pages(ch.kv_seq);
    if (ch.start_pos < 0 || end > static_cast<int64_t>(pages.size()) * page) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "batch plan: sequence %d needs positions up to %d but has %d pages of %d", ch.kv_seq,
          end, pages.size(), page));
    }
    const int32_t s = static_cast<int32_t>(c);
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      const int32_t t = ch.tokens[i];
      if (t < 0 || t >= vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("batch plan: token id %d outside vocabulary [0, %d)", t, vocab_size));
      }
      const int32_t idx = static_cast<int32_t>(plan.tokens_.size());
      plan.tokens_.push_back(t);
      plan.positions_.push_back(ch.start_pos + static_cast<int32_t>(i));
      plan.seq_of_token_.push_back(s);
      const bool last = i + 1 == ch.tokens.size();
      if (ch.logits == SequenceChunk::Logits::kAll ||
          (ch.logits == SequenceChunk::Logits::kLast && last)) {
        plan.logit_tokens_.push_back(idx);
      }
    }
    if (end > 0) plan.max_position_ = std::max<int>(plan.max_position_, end - 1);
    const int64_t used_pages = (end + page - 1) / page;
    plan.page_table_.insert(plan.page_table_.end(), pages.begin(), pages.begin() + used_pages);
    plan.page_indptr_.push_back(static_cast<int32_t>(plan.page_table_.size()));
    plan.logit_indptr_.push_back(static_cast<int32_t>(plan.logit_tokens_.size()));
  }
  return plan;
}

kernels::AttentionBatch BatchPlan::attention() const {
  kernels::AttentionBatch b;
  b.n_tokens = n_tokens();
  b.seq_of_token = seq_of_token_.data();
  b.positions = positions_.data();
  b.page_indptr = page_indptr_.data();
  b.page_table = page_table_.data();
  return b;
}

}  // namespace loom
