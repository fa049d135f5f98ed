// ReferenceLoraOps on a hand-computed example (small dyadic values: every product and sum
// is exact in float, so the expected values below are exact), segment skipping, and BGMV.
#include "kernels/cpu/sgmv/reference_lora_ops.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "kernels/lora_ops.h"

namespace loom::kernels {
namespace {

std::vector<uint16_t> ToBf16(const std::vector<float>& f) {
  std::vector<uint16_t> out;
  for (float x : f) out.push_back(Fp32ToBf16(x));
  return out;
}

// h_in 3, rank 2, h_out 2, scale 0.5.
//   A = [[1, 2, -1], [0.5, 0, 3]]   B = [[1, -2], [0.5, 4]]
//   x0 = [1, -1, 2]:    v0 = [1 - 2 - 2, 0.5 + 0 + 6]        = [-3, 6.5]
//   x1 = [0.25, 4, 1]:  v1 = [0.25 + 8 - 1, 0.125 + 0 + 3]   = [7.25, 3.125]
//   y0 = [1, 1] + 0.5 * [-3 - 13, -1.5 + 26]                  = [-7, 13.25]
//   y1 = [0, -1] + 0.5 * [7.25 - 6.25, 3.625 + 12.5]          = [0.5, 7.0625]
struct Example {
  std::vector<uint16_t> a = ToBf16({1, 2, -1, 0.5f, 0, 3});
  std::vector<uint16_t> b = ToBf16({1, -2, 0.5f, 4});
  LoraPair lora{a.data(), b.data(), 2, 0.5f};
  std::vector<float> x = {1, -1, 2, 0.25f, 4, 1};
  std::vector<float> y0 = {1, 1, 0, -1};
};

TEST(ReferenceLoraOpsTest, HandComputedSgmv) {
  Example e;
  auto ops = CreateReferenceLoraOps();
  const LoraSegment seg{0, 2, &e.lora};
  std::vector<float> v(2 * 3, -99.0f);  // v_stride 3 > rank: column 2 untouched
  ops->SgmvShrink(e.x.data(), 3, &seg, 1, v.data(), 3);
  EXPECT_EQ(v, (std::vector<float>{-3, 6.5f, -99, 7.25f, 3.125f, -99}));
  std::vector<float> y = e.y0;
  ops->SgmvExpand(v.data(), 3, &seg, 1, 2, y.data());
  EXPECT_EQ(y, (std::vector<float>{-7, 13.25f, 0.5f, 7.0625f}));
}

TEST(ReferenceLoraOpsTest, SkipsSegmentsWithoutAdapterAndEmptySegments) {
  Example e;
  auto ops = CreateReferenceLoraOps();
  // Token 0 has no adapter, an empty segment sits between, token 1 uses the adapter.
  const LoraSegment segs[] = {{0, 1, nullptr}, {1, 1, &e.lora}, {1, 2, &e.lora}};
  std::vector<float> v(4, -99.0f), y = e.y0;
  ops->SgmvShrink(e.x.data(), 3, segs, 3, v.data(), 2);
  ops->SgmvExpand(v.data(), 2, segs, 3, 2, y.data());
  EXPECT_EQ(v, (std::vector<float>{-99, -99, 7.25f, 3.125f}));
  EXPECT_EQ(y, (std::vector<float>{1, 1, 0.5f, 7.0625f}));
}

TEST(ReferenceLoraOpsTest, BgmvUsesEachTokensAdapter) {
  Example e;
  // Adapter 1 = adapter 0 with scale 1: token 1's LoRA term doubles (0.5 -> 1, 8.0625 ->
  // 16.125), so y1 = [0 + 1, -1 + 16.125].
  const LoraPair loras[] = {e.lora, LoraPair{e.a.data(), e.b.data(), 2, 1.0f}};
  auto ops = CreateReferenceLoraOps();
  std::vector<float> v(4), y = e.y0;
  const int32_t idx[] = {-1, 1};
  ops->Bgmv(e.x.data(), 3, 2, idx, loras, 2, v.data(), 2, y.data());
  EXPECT_EQ(y, (std::vector<float>{1, 1, 1, 15.125f}));
  y = e.y0;
  const int32_t idx2[] = {0, 0};
  ops->Bgmv(e.x.data(), 3, 2, idx2, loras, 2, v.data(), 2, y.data());
  EXPECT_EQ(y, (std::vector<float>{-7, 13.25f, 0.5f, 7.0625f}));
}

}  // namespace
}  // namespace loom::kernels
