#include "models/lora/gguf_lora_loader.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "models/lora/adapter_loader.h"
#include "models/lora/lora_test_util.h"
#include "models/lora/peft_loader.h"
#include "models/lora/peft_writer.h"
#include "models/testing/test_model.h"
#include "models/weights/gguf_file.h"
#include "models/weights/gguf_reader.h"
#include "models/weights/gguf_writer.h"
#include "models/weights/qk_permutation.h"

namespace loom {
namespace {

using ::loom::testing::FreshDir;
using ::loom::testing::TinyLoraBase;
using ::testing::HasSubstr;

// Same projections, ranks, scales and BF16 weights.
void ExpectSameAdapter(const LoraAdapter& x, const LoraAdapter& y) {
  ASSERT_EQ(x.projections().size(), y.projections().size());
  ASSERT_EQ(x.bytes(), y.bytes());
  for (size_t i = 0; i < x.projections().size(); ++i) {
    const auto& p = x.projections()[i];
    const auto& q = y.projections()[i];
    ASSERT_EQ(p.layer, q.layer);
    ASSERT_EQ(p.target, q.target);
    ASSERT_EQ(p.rank, q.rank);
    ASSERT_FLOAT_EQ(p.scale, q.scale);
    ASSERT_EQ(0, std::memcmp(x.a(i), y.a(i), size_t{2} * p.rank * p.h_in)) << i;
    ASSERT_EQ(0, std::memcmp(x.b(i), y.b(i), size_t{2} * p.rank * p.h_out))
        << "layer " << p.layer << " " << PeftModuleName(p.target);
  }
  EXPECT_EQ(x.Fingerprint(), y.Fingerprint());
}

// Writes `spec` both ways and checks both load to the same adapter on `base`.
void CheckPeftEqualsGguf(const LlamaConfig& base, const SyntheticAdapterSpec& spec) {
  auto syn = MakeSyntheticAdapter(base, spec);
  ASSERT_TRUE(syn.ok()) << syn.status();
  const std::string dir = FreshDir("both");
  ASSERT_TRUE(WritePeftAdapter(*syn, dir).ok());
  ASSERT_TRUE(WriteGgufLora(*syn, dir + "/adapter.gguf").ok());
  for (RopeLayout layout : {RopeLayout::kAdjacentPairs, RopeLayout::kHalves}) {
    LlamaConfig b = base;
    b.rope_layout = layout;
    auto peft = LoadAdapter(dir, b, AdapterLimits{});
    ASSERT_TRUE(peft.ok()) << peft.status();
    auto gguf = LoadAdapter(dir + "/adapter.gguf", b, AdapterLimits{});
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    EXPECT_EQ((*peft)->format(), AdapterFormat::kPeft);
    EXPECT_EQ((*gguf)->format(), AdapterFormat::kGgufLora);
    EXPECT_EQ((*gguf)->id(), dir + "/adapter.gguf");
    ExpectSameAdapter(**peft, **gguf);
  }
  // The GGUF file itself is in GGUF row order: its q/k lora_b row g is HF row
  // HfRowOfGgufRow(g) (checked against the definition, not against our loader).
  auto f = GgufFile::Open(dir + "/adapter.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  const auto& p0 = syn->projections[0];
  ASSERT_EQ(p0.target, LoraTarget::kQ);
  const int r = spec.rank;
  for (const GgufTensorInfo& t : (*f)->tensor_infos()) {
    if (t.name != absl::StrFormat("blk.%d.attn_q.weight.lora_b", p0.layer)) continue;
    ASSERT_EQ(t.ne, (std::vector<int64_t>{r, p0.h_out}));  // ne = [r, n_out]
    ASSERT_EQ(t.dtype, spec.dtype);
    std::vector<float> data(static_cast<size_t>(p0.h_out) * r);
    DequantizeRow(t.dtype, (*f)->TensorData(t), data.data(), data.size());
    for (int64_t g = 0; g < p0.h_out; ++g) {
      for (int k = 0; k < r; ++k) {
        ASSERT_EQ(data[g * r + k], p0.b[HfRowOfGgufRow(g, base.head_dim) * r + k]);
      }
    }
    return;
  }
  FAIL() << "no attn_q lora_b";
}

TEST(GgufLoraTest, SameAdapterAsPeftOnTinyBase) {
  SyntheticAdapterSpec spec;
  spec.rank = 4;
  spec.alpha = 12;
  CheckPeftEqualsGguf(TinyLoraBase(), spec);
  spec.use_rslora = true;  // written to GGUF as alpha * sqrt(r)
  spec.dtype = DType::kBF16;
  CheckPeftEqualsGguf(TinyLoraBase(), spec);
}

TEST(GgufLoraTest, SameAdapterAsPeftOnSmolLm2Config) {
  auto f = GgufFile::Open(::loom::testing::DefaultModelPath());
  if (!f.ok()) GTEST_SKIP() << "default model not available: " << f.status();
  auto cfg = LlamaConfigFromGguf(**f);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->n_kv_heads * 3, cfg->n_heads);  // GQA: 9 heads, 3 kv heads
  SyntheticAdapterSpec spec;
  spec.rank = 8;
  spec.alpha = 16;
  spec.dtype = DType::kF16;
  CheckPeftEqualsGguf(*cfg, spec);
}

// A handwritten GGUF-LoRA for layer 0 q_proj of the tiny base.
GgufWriter HandWritten(float alpha, bool with_alpha, int rank = 2,
                       std::vector<int64_t> b_shape = {}) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("general.type", "adapter");
  w.AddString("adapter.type", "lora");
  if (with_alpha) w.AddF32("adapter.lora.alpha", alpha);
  const std::vector<int64_t> bs = b_shape.empty() ? std::vector<int64_t>{64, rank} : b_shape;
  EXPECT_TRUE(w.AddF32Tensor("blk.0.attn_q.weight.lora_a", {rank, 64},
                             std::vector<float>(rank * 64, 0.25f))
                  .ok());
  EXPECT_TRUE(
      w.AddF32Tensor("blk.0.attn_q.weight.lora_b", bs, std::vector<float>(bs[0] * bs[1], 0.5f))
          .ok());
  return w;
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadWritten(const GgufWriter& w,
                                                         const AdapterLimits& limits = {}) {
  const std::string path = FreshDir("gguf") + "/a.gguf";
  EXPECT_TRUE(w.WriteFile(path).ok());
  return LoadGgufLora(path, TinyLoraBase(), limits);
}

TEST(GgufLoraTest, ScaleIsAlphaOverRankAndOneForAlphaZero) {
  auto a = LoadWritten(HandWritten(8.0f, true));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FLOAT_EQ((*a)->Pair(0, LoraTarget::kQ)->scale, 4.0f);
  EXPECT_EQ((*a)->Pair(0, LoraTarget::kK), nullptr);
  EXPECT_EQ((*a)->Pair(0, LoraTarget::kQ)->a[0], Fp32ToBf16(0.25f));
  auto z = LoadWritten(HandWritten(0.0f, true));
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_FLOAT_EQ((*z)->Pair(0, LoraTarget::kQ)->scale, 1.0f);
  auto none = LoadWritten(HandWritten(0.0f, false));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FLOAT_EQ((*none)->Pair(0, LoraTarget::kQ)->scale, 1.0f);
}

TEST(GgufLoraTest, Refusals) {
  // Not an adapter.
  GgufWriter model;
  model.AddString("general.architecture", "llama");
  model.AddString("general.type", "model");
  auto st = LoadWritten(model).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("general.type"));

  // Wrong output width for this base.
  st = LoadWritten(HandWritten(8, true, 2, {32, 2})).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("blk.0.attn_q.weight"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("[64, 2]"));

  // Rank above the limit.
  st = LoadWritten(HandWritten(8, true, 4), AdapterLimits{3}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("limit 3"));

  // Unknown target, embedding LoRA, layer past the base, NaN, missing half.
  {
    GgufWriter w = HandWritten(8, true);
    ASSERT_TRUE(w.AddF32Tensor("blk.0.attn_norm.weight.lora_a", {2, 64},
                               std::vector<float>(128, 0.f)).ok());
    st = LoadWritten(w).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("unknown target module 'attn_norm'"));
  }
  {
    GgufWriter w = HandWritten(8, true);
    ASSERT_TRUE(w.AddF32Tensor("token_embd.weight.lora_a", {2, 40},
                               std::vector<float>(80, 0.f)).ok());
    st = LoadWritten(w).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("embedding"));
  }
  {
    GgufWriter w = HandWritten(8, true);
    ASSERT_TRUE(w.AddF32Tensor("blk.2.ffn_up.weight.lora_a", {2, 64},
                               std::vector<float>(128, 0.f)).ok());
    st = LoadWritten(w).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("layer 2"));
  }
  {
    GgufWriter w;
    w.AddString("general.type", "adapter");
    w.AddString("adapter.type", "lora");
    std::vector<float> a(128, 0.1f);
    a[77] = std::numeric_limits<float>::quiet_NaN();
    ASSERT_TRUE(w.AddF32Tensor("blk.1.attn_v.weight.lora_a", {2, 64}, a).ok());
    ASSERT_TRUE(w.AddF32Tensor("blk.1.attn_v.weight.lora_b", {32, 2},
                               std::vector<float>(64, 0.1f)).ok());
    st = LoadWritten(w).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("non-finite"));
    EXPECT_THAT(std::string(st.message()), HasSubstr("blk.1.attn_v.weight.lora_a"));
  }
  {
    GgufWriter w;
    w.AddString("general.type", "adapter");
    w.AddString("adapter.type", "lora");
    ASSERT_TRUE(w.AddF32Tensor("blk.1.attn_v.weight.lora_a", {2, 64},
                               std::vector<float>(128, 0.f)).ok());
    st = LoadWritten(w).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("missing tensor 'blk.1.attn_v.weight.lora_b'"));
  }
}

TEST(GgufLoraTest, MissingAndTruncatedFiles) {
  const std::string dir = FreshDir("trunc");
  auto st = LoadGgufLora(dir + "/none.gguf", TinyLoraBase(), {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  const std::string bytes = HandWritten(8, true).Serialize();
  const std::string path = dir + "/t.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes.substr(0, bytes.size() - 64);
  }
  st = LoadGgufLora(path, TinyLoraBase(), {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("t.gguf"));
}

}  // namespace
}  // namespace loom
