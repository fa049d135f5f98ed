#include "models/lora/lora_adapter.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "models/lora/lora_tensor_copy.h"

namespace loom {
namespace {

TEST(LoraAdapterTest, CreateLaysOutOneAllocationAndIndexesPairs) {
  std::vector<LoraProjectionInfo> p = {
      {1, LoraTarget::kDown, 3, 0.5f, 12, 8},
      {0, LoraTarget::kQ, 2, 2.0f, 8, 8},
  };
  auto ad = LoraAdapter::Create("id", "src", AdapterFormat::kInMemory, 2, p);
  ASSERT_TRUE(ad.ok()) << ad.status();
  const LoraAdapter& a = **ad;
  // Sorted by layer then target.
  ASSERT_EQ(a.projections()[0].target, LoraTarget::kQ);
  EXPECT_EQ(a.bytes(), 2u * (2 * (8 + 8) + 3 * (12 + 8)));
  EXPECT_EQ(a.max_rank(), 3);
  EXPECT_EQ(a.targets(), (std::vector<LoraTarget>{LoraTarget::kQ, LoraTarget::kDown}));
  const kernels::LoraPair* q = a.Pair(0, LoraTarget::kQ);
  const kernels::LoraPair* d = a.Pair(1, LoraTarget::kDown);
  ASSERT_NE(q, nullptr);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(q->rank, 2);
  EXPECT_FLOAT_EQ(d->scale, 0.5f);
  // Contiguous: q.A [2,8], q.B [8,2], then down.A [3,12], down.B [8,3].
  EXPECT_EQ(q->b, q->a + 16);
  EXPECT_EQ(d->a, q->b + 16);
  EXPECT_EQ(d->b, d->a + 36);
  EXPECT_EQ(a.Pair(0, LoraTarget::kK), nullptr);
  EXPECT_EQ(a.Pair(1, LoraTarget::kQ), nullptr);
  EXPECT_EQ(a.Pair(2, LoraTarget::kQ), nullptr);
  EXPECT_EQ(a.Pair(-1, LoraTarget::kQ), nullptr);
}

TEST(LoraAdapterTest, CreateRefusesBadProjections) {
  EXPECT_FALSE(LoraAdapter::Create("", "", AdapterFormat::kInMemory, 1,
                                   {{1, LoraTarget::kQ, 2, 1, 8, 8}}).ok());
  EXPECT_FALSE(LoraAdapter::Create("", "", AdapterFormat::kInMemory, 1,
                                   {{0, LoraTarget::kQ, 0, 1, 8, 8}}).ok());
  EXPECT_FALSE(LoraAdapter::Create("", "", AdapterFormat::kInMemory, 1,
                                   {{0, LoraTarget::kQ, 2, 1, 8, 8},
                                    {0, LoraTarget::kQ, 2, 1, 8, 8}}).ok());
}

TEST(LoraAdapterTest, FingerprintSeesWeightsAndScale) {
  auto make = [](float scale) {
    return *LoraAdapter::Create("", "", AdapterFormat::kInMemory, 1,
                                {{0, LoraTarget::kV, 2, scale, 4, 4}});
  };
  auto x = make(1.0f), y = make(1.0f), z = make(2.0f);
  EXPECT_EQ(x->Fingerprint(), y->Fingerprint());
  EXPECT_NE(x->Fingerprint(), z->Fingerprint());
  y->mutable_b(0)[3] = Fp32ToBf16(1.0f);
  EXPECT_NE(x->Fingerprint(), y->Fingerprint());
}

TEST(LoraAdapterTest, NamesRoundTrip) {
  for (LoraTarget t : kAllLoraTargets) {
    EXPECT_EQ(LoraTargetFromPeftName(PeftModuleName(t)), t);
    EXPECT_EQ(LoraTargetFromGgufStem(GgufTensorStem(t)), t);
  }
  EXPECT_FALSE(LoraTargetFromPeftName("lm_head").has_value());
  EXPECT_STREQ(GgufTensorStem(LoraTarget::kO), "attn_output");
}

TEST(LoraTensorCopyTest, TransposePermutationAndTypes) {
  // src [3, 2] stored transposed as [2, 3]: element (r, c) at c * 3 + r.
  const std::vector<float> t = {0, 1, 2, 10, 11, 12};
  StoredMatrix m{"t", DType::kF32, reinterpret_cast<const uint8_t*>(t.data()), true};
  std::vector<uint16_t> out(6);
  ASSERT_TRUE(CopyToBf16(m, 3, 2, [](int64_t r) { return 2 - r; }, out.data()).ok());
  // dst row 0 = src row 2 = (2, 12).
  EXPECT_EQ(Bf16ToFp32(out[0]), 2.0f);
  EXPECT_EQ(Bf16ToFp32(out[1]), 12.0f);
  EXPECT_EQ(Bf16ToFp32(out[4]), 0.0f);
  EXPECT_EQ(Bf16ToFp32(out[5]), 10.0f);
  // F16 source.
  std::vector<uint16_t> h = {Fp32ToFp16(0.5f), Fp32ToFp16(-3.0f)};
  StoredMatrix mh{"h", DType::kF16, reinterpret_cast<const uint8_t*>(h.data()), false};
  ASSERT_TRUE(CopyToBf16(mh, 1, 2, nullptr, out.data()).ok());
  EXPECT_EQ(Bf16ToFp32(out[1]), -3.0f);
  // Inf in F16 is refused.
  h[1] = 0x7C00;
  EXPECT_EQ(CopyToBf16(mh, 1, 2, nullptr, out.data()).code(),
            absl::StatusCode::kFailedPrecondition);
  // Q8_0: one block of 32, d = 0.5.
  BlockQ8_0 blk;
  blk.d = Fp32ToFp16(0.5f);
  for (int i = 0; i < 32; ++i) blk.qs[i] = static_cast<int8_t>(i - 16);
  std::vector<uint16_t> q(32);
  StoredMatrix mq{"q", DType::kQ8_0, reinterpret_cast<const uint8_t*>(&blk), false};
  ASSERT_TRUE(CopyToBf16(mq, 1, 32, nullptr, q.data()).ok());
  EXPECT_EQ(Bf16ToFp32(q[0]), -8.0f);
  EXPECT_EQ(Bf16ToFp32(q[31]), 7.5f);
  StoredMatrix mq4{"q4", DType::kQ4_0, nullptr, false};
  EXPECT_EQ(CopyToBf16(mq4, 1, 32, nullptr, q.data()).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loom
