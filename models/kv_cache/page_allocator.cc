#include "models/kv_cache/page_allocator.h"

#include "absl/strings/str_format.h"

namespace loom {

PageAllocator::PageAllocator(int32_t n_pages) : in_use_(n_pages, false) {
  free_.reserve(n_pages);
  for (int32_t p = n_pages - 1; p >= 0; --p) free_.push_back(p);
}

absl::Status PageAllocator::Allocate(int32_t count, std::vector<int32_t>* pages) {
  if (count < 0 || count > free_pages()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache: %d pages requested, %d of %d free", count, free_pages(), total_pages()));
  }
  for (int32_t i = 0; i < count; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
    in_use_[p] = true;
    pages->push_back(p);
  }
  return absl::OkStatus();
}

void PageAllocator::Free(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    if (p >= 0 && p < total_pages() && in_use_[p]) {
      in_use_[p] = false;
      free_.push_back(p);
    }
  }
}

}  // namespace loom
