// Hands out fixed-size KV pages from a pool of n_pages; O(1) allocate and free.
// Not thread-safe: owned by one engine thread.
#ifndef LOOM_MODELS_KV_CACHE_PAGE_ALLOCATOR_H_
#define LOOM_MODELS_KV_CACHE_PAGE_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace loom {

class PageAllocator {
 public:
  explicit PageAllocator(int32_t n_pages);

  int32_t total_pages() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t free_pages() const { return static_cast<int32_t>(free_.size()); }
  int32_t used_pages() const { return total_pages() - free_pages(); }

  // Appends `count` page ids to `pages`, or returns ResourceExhausted (and allocates
  // nothing) when fewer than `count` pages are free.
  absl::Status Allocate(int32_t count, std::vector<int32_t>* pages);

  // Returns pages to the pool. REQUIRES: each page is currently allocated.
  void Free(const std::vector<int32_t>& pages);

 private:
  std::vector<int32_t> free_;  // stack; lowest ids are handed out first
  std::vector<bool> in_use_;
};

}  // namespace loom

#endif  // LOOM_MODELS_KV_CACHE_PAGE_ALLOCATOR_H_
