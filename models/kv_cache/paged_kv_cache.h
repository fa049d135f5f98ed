// The paged KV cache of one model replica: per layer, a K pool and a V pool of pages laid
// out [n_pages][page_size][n_kv_heads][row] (kernels::KvLayout; rows in FP16, INT8 or
// INT4-asymmetric), a page allocator, and one page list per sequence slot. Not
// thread-safe: owned by one engine thread.
#ifndef LOOM_MODELS_KV_CACHE_PAGED_KV_CACHE_H_
#define LOOM_MODELS_KV_CACHE_PAGED_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "models/kv_cache/page_allocator.h"
#include "models/model_config.h"

namespace loom {

struct KvCacheOptions {
  int page_size = 16;
  // Element type of the cached rows (kernels/backend.h): kInt8 holds 1.9x and kInt4 3.6x
  // the FP16 tokens in the same budget (head_dim 64).
  kernels::KvDtype dtype = kernels::KvDtype::kF16;
  // Pool size; when 0, derived from budget_bytes.
  int32_t n_pages = 0;
  size_t budget_bytes = size_t{512} << 20;
};

class PagedKvCache {
 public:
  static absl::StatusOr<std::unique_ptr<PagedKvCache>> Create(const LlamaConfig& config,
                                                              const KvCacheOptions& options);

  const kernels::KvLayout& layout() const { return layout_; }
  int page_size() const { return layout_.page_size; }
  const PageAllocator& allocator() const { return allocator_; }
  // Bytes of K+V for one token over all layers.
  size_t bytes_per_token() const;

  uint8_t* k_pool(int layer) { return k_[layer].data(); }
  uint8_t* v_pool(int layer) { return v_[layer].data(); }

  // Sequence slots: a slot holds the pages of one sequence.
  int32_t NewSequence();
  // Makes sure `seq` has pages for positions [0, n_positions). ResourceExhausted (nothing
  // changed) when the pool cannot supply them.
  absl::Status Reserve(int32_t seq, int32_t n_positions);
  // Pages needed to grow `seq` to n_positions (0 if it already has them).
  int32_t PagesNeeded(int32_t seq, int32_t n_positions) const;
  // Returns the sequence's pages to the pool and frees the slot.
  void Release(int32_t seq);
  const std::vector<int32_t>& Pages(int32_t seq) const { return seqs_[seq]; }

 private:
  PagedKvCache(kernels::KvLayout layout, int n_layers, int32_t n_pages);

  kernels::KvLayout layout_;
  PageAllocator allocator_;
  std::vector<std::vector<uint8_t>> k_, v_;  // [layer] -> pool
  std::vector<std::vector<int32_t>> seqs_;    // [slot] -> pages in position order
  std::vector<bool> slot_used_;
  std::vector<int32_t> free_slots_;
};

}  // namespace loom

#endif  // LOOM_MODELS_KV_CACHE_PAGED_KV_CACHE_H_
