#include "models/llama/batch_plan.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/str_format.h"

namespace loom {

absl::StatusOr<BatchPlan> BatchPlan::Build(const std::vector<SequenceChunk>& chunks,
                                           const PagedKvCache& kv, int32_t vocab_size) {
  // Order: base-model chunks first, then adapters in order of first appearance.
  std::unordered_map<const AdapterWeights*, int> group;
  group[nullptr] = 0;
  for (const SequenceChunk& ch : chunks) {
    group.emplace(ch.adapter, static_cast<int>(group.size()));
  }
  std::vector<size_t> order(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return group[chunks[a].adapter] < group[chunks[b].adapter];
  });

  BatchPlan plan;
  plan.chunk_logit_begin_.assign(chunks.size(), 0);
  plan.chunk_logit_end_.assign(chunks.size(), 0);
  std::set<int32_t> seen;
  const int page = kv.page_size();
  for (size_t c : order) {
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
    const int32_t s = static_cast<int32_t>(plan.page_indptr_.size()) - 1;
    const int32_t first_token = static_cast<int32_t>(plan.tokens_.size());
    plan.chunk_logit_begin_[c] = static_cast<int32_t>(plan.logit_tokens_.size());
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
    plan.chunk_logit_end_[c] = static_cast<int32_t>(plan.logit_tokens_.size());
    const int32_t last_token = static_cast<int32_t>(plan.tokens_.size());
    if (ch.adapter != nullptr && last_token > first_token) {
      if (!plan.segments_.empty() && plan.segments_.back().adapter == ch.adapter) {
        plan.segments_.back().end = last_token;
      } else {
        plan.segments_.push_back({first_token, last_token, ch.adapter});
        plan.max_rank_ = std::max(plan.max_rank_, ch.adapter->max_rank());
      }
    }
    if (end > 0) plan.max_position_ = std::max<int>(plan.max_position_, end - 1);
    const int64_t used_pages = (end + page - 1) / page;
    plan.page_table_.insert(plan.page_table_.end(), pages.begin(), pages.begin() + used_pages);
    plan.page_indptr_.push_back(static_cast<int32_t>(plan.page_table_.size()));
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
