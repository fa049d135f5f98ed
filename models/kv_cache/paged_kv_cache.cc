#include "models/kv_cache/paged_kv_cache.h"

#include "absl/strings/str_format.h"

namespace loom {

PagedKvCache::PagedKvCache(kernels::KvLayout layout, int n_layers, int32_t n_pages)
    : layout_(layout), allocator_(n_pages) {
  const size_t bytes = layout_.page_bytes() * static_cast<size_t>(n_pages);
  k_.resize(n_layers);
  v_.resize(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    k_[l].assign(bytes, 0);
    v_[l].assign(bytes, 0);
  }
}

absl::StatusOr<std::unique_ptr<PagedKvCache>> PagedKvCache::Create(
    const LlamaConfig& config, const KvCacheOptions& options) {
  if (options.page_size <= 0 || options.page_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV cache: page_size %d out of range [1, 1024]", options.page_size));
  }
  kernels::KvLayout layout;
  layout.page_size = options.page_size;
  layout.n_kv_heads = config.n_kv_heads;
  layout.head_dim = config.head_dim;
  layout.dtype = options.dtype;
  if (options.dtype != kernels::KvDtype::kF16 && config.head_dim > 4096) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache: quantized rows need head_dim <= 4096 (the model has %d)", config.head_dim));
  }
  if (options.dtype == kernels::KvDtype::kInt4 && config.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache: int4 needs an even head_dim (the model has %d)", config.head_dim));
  }
  const size_t page_bytes =
      layout.page_bytes() * 2 /*K,V*/ * static_cast<size_t>(config.n_layers);
  int64_t n_pages = options.n_pages;
  if (n_pages == 0) n_pages = static_cast<int64_t>(options.budget_bytes / page_bytes);
  if (n_pages <= 0 || n_pages > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache: %d pages of %d bytes do not fit (budget %d bytes)", n_pages, page_bytes,
        options.budget_bytes));
  }
  return std::unique_ptr<PagedKvCache>(
      new PagedKvCache(layout, config.n_layers, static_cast<int32_t>(n_pages)));
}

size_t PagedKvCache::bytes_per_token() const {
  return static_cast<size_t>(layout_.n_kv_heads) * layout_.row_bytes() * 2 * k_.size();
}

int32_t PagedKvCache::NewSequence() {
  if (!free_slots_.empty()) {
    const int32_t s = free_slots_.back();
    free_slots_.pop_back();
    slot_used_[s] = true;
    return s;
  }
  seqs_.emplace_back();
  slot_used_.push_back(true);
  return static_cast<int32_t>(seqs_.size() - 1);
}

int32_t PagedKvCache::PagesNeeded(int32_t seq, int32_t n_positions) const {
  const int32_t want = (n_positions + layout_.page_size - 1) / layout_.page_size;
  const int32_t have = static_cast<int32_t>(seqs_[seq].size());
  return want > have ? want - have : 0;
}

absl::Status PagedKvCache::Reserve(int32_t seq, int32_t n_positions) {
  return allocator_.Allocate(PagesNeeded(seq, n_positions), &seqs_[seq]);
}

void PagedKvCache::Release(int32_t seq) {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size()) || !slot_used_[seq]) return;
  allocator_.Free(seqs_[seq]);
  seqs_[seq].clear();
  slot_used_[seq] = false;
  free_slots_.push_back(seq);
}

}  // namespace loom
