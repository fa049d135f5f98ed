#include "models/kv_cache/paged_kv_cache.h"

#include <set>
#include <string>
#include <tuple>

#include "gtest/gtest.h"

namespace loom {
namespace {

LlamaConfig TinyConfig() {
  LlamaConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  return c;
}

TEST(PageAllocatorTest, AllocatesAllThenRefuses) {
  PageAllocator a(4);
  std::vector<int32_t> pages;
  ASSERT_TRUE(a.Allocate(3, &pages).ok());
  EXPECT_EQ(a.free_pages(), 1);
  absl::Status s = a.Allocate(2, &pages);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pages.size(), 3u);  // nothing allocated by the failed call
  std::set<int32_t> unique(pages.begin(), pages.end());
  EXPECT_EQ(unique.size(), 3u);
  a.Free(pages);
  EXPECT_EQ(a.free_pages(), 4);
}

TEST(PagedKvCacheTest, ReserveGrowsByPagesAndReleaseReturnsThem) {
  KvCacheOptions o;
  o.page_size = 16;
  o.n_pages = 10;
  auto cache = PagedKvCache::Create(TinyConfig(), o);
  ASSERT_TRUE(cache.ok()) << cache.status();
  PagedKvCache& c = **cache;
  EXPECT_EQ(c.layout().page_elems(), 16u * 2 * 8);
  const int32_t a = c.NewSequence();
  const int32_t b = c.NewSequence();
  EXPECT_NE(a, b);
  ASSERT_TRUE(c.Reserve(a, 17).ok());
  EXPECT_EQ(c.Pages(a).size(), 2u);
  ASSERT_TRUE(c.Reserve(a, 32).ok());
  EXPECT_EQ(c.Pages(a).size(), 2u);
  EXPECT_EQ(c.PagesNeeded(a, 33), 1);
  ASSERT_TRUE(c.Reserve(b, 16 * 8).ok());
  EXPECT_EQ(c.allocator().free_pages(), 0);
  EXPECT_EQ(c.Reserve(a, 33).code(), absl::StatusCode::kResourceExhausted);
  c.Release(b);
  EXPECT_EQ(c.allocator().free_pages(), 8);
  const int32_t d = c.NewSequence();
  EXPECT_EQ(d, b);  // slot reused
  EXPECT_TRUE(c.Pages(d).empty());
}

TEST(PagedKvCacheTest, BudgetDerivesPageCount) {
  KvCacheOptions o;
  o.budget_bytes = 16 * 2 * 8 * 2 * 2 * 2 * 5;  // 5 pages of (K+V) x 2 layers
  auto cache = PagedKvCache::Create(TinyConfig(), o);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->allocator().total_pages(), 5);
  o.budget_bytes = 10;
  EXPECT_FALSE(PagedKvCache::Create(TinyConfig(), o).ok());
}

// The same budget holds more pages of quantized rows: head_dim 8 -> FP16 rows of 16
// bytes, INT8 rows of 2 + 8 = 10, INT4 rows of 4 + 4 = 8.
TEST(PagedKvCacheTest, QuantizedRowsFitMorePagesInABudget) {
  KvCacheOptions o;
  o.budget_bytes = 16 * 2 * 16 * 2 * 2 * 20;  // 20 FP16 pages of (K+V) x 2 layers
  for (auto [dtype, row, pages] : {std::tuple{kernels::KvDtype::kF16, 16, 20},
                                   std::tuple{kernels::KvDtype::kInt8, 10, 32},
                                   std::tuple{kernels::KvDtype::kInt4, 8, 40}}) {
    o.dtype = dtype;
    auto cache = PagedKvCache::Create(TinyConfig(), o);
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ((*cache)->layout().row_bytes(), static_cast<size_t>(row));
    EXPECT_EQ((*cache)->allocator().total_pages(), pages);
    EXPECT_EQ((*cache)->bytes_per_token(), static_cast<size_t>(row) * 2 * 2 * 2);
    EXPECT_EQ((*cache)->layout().dtype, dtype);
  }
  LlamaConfig odd = TinyConfig();
  odd.head_dim = 7;
  o.dtype = kernels::KvDtype::kInt4;
  const auto refused = PagedKvCache::Create(odd, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("even head_dim"), std::string::npos);
}

}  // namespace
}  // namespace loom
