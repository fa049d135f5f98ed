// Rotation folding is exact: a rotated F32 model (R folded into the linears, norms folded,
// online Hadamards on o/down inputs, R at the embedding and Rᵀ before the head) gives the
// unrotated model's logits within float tolerance, on a tiny synthetic model for every
// combination of online transforms and on SmolLM2-135M.
#include "models/rotation/rotate_weights.h"

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <numeric>
#include <random>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/thread_pool.h"
#include "models/eval/f32_model_source.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/batch_plan.h"
#include "models/llama/llama_model.h"
#include "models/testing/test_model.h"
#include "models/weights/tiny_llama_gguf.h"

namespace loom {
namespace {

std::vector<float> PrefillLogits(const LlamaModel& m, const std::vector<int32_t>& tokens) {
  KvCacheOptions o;
  o.n_pages = 64;
  auto kv = PagedKvCache::Create(m.config(), o);
  EXPECT_TRUE(kv.ok());
  const int32_t seq = (*kv)->NewSequence();
  EXPECT_TRUE((*kv)->Reserve(seq, tokens.size()).ok());
  SequenceChunk c;
  c.kv_seq = seq;
  c.start_pos = 0;
  c.tokens = tokens;
  c.logits = SequenceChunk::Logits::kAll;
  auto plan = BatchPlan::Build({c}, **kv, m.config().vocab_size);
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<float> logits(tokens.size() * m.config().vocab_size);
  ForwardWorkspace ws;
  absl::Status s = m.Forward(*plan, kv->get(), &ws, logits.data());
  EXPECT_TRUE(s.ok()) << s;
  return logits;
}

// max |a - b| / max |a|. The tolerances below are set by the FP16 KV cache: K/V rows are
// rounded to FP16 (relative step 2^-11), so a last-bit difference in k or v (the rotated
// model sums in another order) can move a stored value by one FP16 step; the weights and
// activations themselves are F32.
double RelativeMaxError(const std::vector<float>& a, const std::vector<float>& b) {
  double amax = 0, dmax = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    amax = std::max(amax, std::fabs(double(a[i])));
    dmax = std::max(dmax, std::fabs(double(a[i]) - b[i]));
  }
  return dmax / amax;
}

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = 3 + static_cast<int32_t>(rng() % (vocab - 3));
  return t;
}

class TinyRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TinyLlamaOptions o;
    o.hidden = 64;
    o.intermediate = 96;  // 12 x 8: a Paley block
    path_ = std::string(::testing::TempDir()) + "/rotation_tiny.gguf";
    ASSERT_TRUE(BuildTinyLlamaGguf(o).WriteFile(path_).ok());
    backend_ = kernels::CreateCpuBackendOnPool(&pool_);
  }
  std::unique_ptr<ModelSource> F32() {
    auto src = ModelSource::Open(path_);
    EXPECT_TRUE(src.ok()) << src.status();
    auto f32 = DequantizeToF32(**src);
    EXPECT_TRUE(f32.ok()) << f32.status();
    return *std::move(f32);
  }
  kernels::ThreadPool pool_{2};
  std::unique_ptr<kernels::Backend> backend_;
  std::string path_;
};

TEST_F(TinyRotationTest, RotatedLogitsEqualUnrotated) {
  auto plain = LlamaModel::Create(F32(), backend_.get());
  ASSERT_TRUE(plain.ok()) << plain.status();
  const std::vector<int32_t> tokens = Tokens(20, (*plain)->config().vocab_size, 3);
  const std::vector<float> want = PrefillLogits(**plain, tokens);
  for (bool attn_out : {false, true}) {
    for (bool silu_mul : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "online attn_out " << attn_out << " silu_mul " << silu_mul);
      std::unique_ptr<ModelSource> f32 = F32();
      auto rot = RotateF32Model({7, attn_out, silu_mul}, f32.get());
      ASSERT_TRUE(rot.ok()) << rot.status();
      // The weights did change (the fold is not a no-op) ...
      const float* q = reinterpret_cast<const float*>((*f32->Tensor("blk.0.attn_q.weight"))->data);
      const float* q0 = reinterpret_cast<const float*>(
          (*(*plain)->source().Tensor("blk.0.attn_q.weight"))->data);
      double diff = 0;
      for (int i = 0; i < 64 * 64; ++i) diff = std::max(diff, std::fabs(double(q[i]) - q0[i]));
      EXPECT_GT(diff, 1e-3);
      auto rotated = LlamaModel::CreateRotated(std::move(f32), *rot, backend_.get());
      ASSERT_TRUE(rotated.ok()) << rotated.status();
      // ... and the function did not.
      const std::vector<float> got = PrefillLogits(**rotated, tokens);
      EXPECT_LT(RelativeMaxError(want, got), 3e-4);
    }
  }
}

// Rotations that keep outlier channels out (random orders: exactness holds for any).
TEST_F(TinyRotationTest, PartialRotationsAreExactToo) {
  auto plain = LlamaModel::Create(F32(), backend_.get());
  ASSERT_TRUE(plain.ok());
  const LlamaConfig c = (*plain)->config();
  const std::vector<int32_t> tokens = Tokens(20, c.vocab_size, 8);
  const std::vector<float> want = PrefillLogits(**plain, tokens);
  std::mt19937 rng(3);
  auto perm = [&](int k) {
    std::vector<int32_t> p(k);
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    return p;
  };
  RotationOrders orders;
  orders.residual = perm(c.hidden);
  for (int l = 0; l < c.n_layers; ++l) {
    orders.attn_out.push_back(perm(c.n_heads * c.head_dim));
    orders.silu_mul.push_back(perm(c.intermediate));
  }
  RotationSpec spec{7, true, true};
  spec.residual_outliers = 16;  // 48 rotated: 12 x 4
  spec.attn_out_outliers = 32;  // 32 rotated
  spec.silu_mul_outliers = 16;  // 80 rotated
  std::unique_ptr<ModelSource> f32 = F32();
  auto rot = RotateF32Model(spec, f32.get(), orders);
  ASSERT_TRUE(rot.ok()) << rot.status();
  EXPECT_EQ((*rot)->residual().n(), 48);
  EXPECT_EQ((*rot)->silu_mul()->n(), 80);  // 20 x 4
  auto rotated = LlamaModel::CreateRotated(std::move(f32), *rot, backend_.get());
  ASSERT_TRUE(rotated.ok());
  EXPECT_LT(RelativeMaxError(want, PrefillLogits(**rotated, tokens)), 3e-4);
  // Orders must fit the spec.
  RotationOrders missing = orders;
  missing.attn_out.clear();
  EXPECT_EQ(ModelRotation::Create(c, spec, missing).status().code(),
            absl::StatusCode::kInvalidArgument);
  RotationSpec no_outliers{7, true, true};
  EXPECT_EQ(ModelRotation::Create(c, no_outliers, orders).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TinyRotationTest, AWrongRotationChangesTheLogits) {
  auto plain = LlamaModel::Create(F32(), backend_.get());
  ASSERT_TRUE(plain.ok());
  const std::vector<int32_t> tokens = Tokens(12, (*plain)->config().vocab_size, 4);
  const std::vector<float> want = PrefillLogits(**plain, tokens);
  std::unique_ptr<ModelSource> f32 = F32();
  auto folded = RotateF32Model({7, true, true}, f32.get());
  ASSERT_TRUE(folded.ok());
  // Run the weights folded with seed 7 under the rotation of seed 8.
  std::unique_ptr<ModelSource> other = F32();
  auto wrong = RotateF32Model({8, true, true}, other.get());
  ASSERT_TRUE(wrong.ok());
  auto m = LlamaModel::CreateRotated(std::move(f32), *wrong, backend_.get());
  ASSERT_TRUE(m.ok());
  EXPECT_GT(RelativeMaxError(want, PrefillLogits(**m, tokens)), 0.05);
}

TEST_F(TinyRotationTest, RefusesWidthsWithoutAHadamardMatrix) {
  LlamaConfig c = F32()->config();
  c.intermediate = 90;  // 2 * 45: no Hadamard matrix
  auto r = ModelRotation::Create(c, {1, true, true});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("FFN intermediate (90 rotated channels)"), std::string::npos)
      << r.status();
  EXPECT_TRUE(ModelRotation::Create(c, {1, true, false}).ok());  // no M_d needed
  auto null_rot = LlamaModel::CreateRotated(F32(), nullptr, backend_.get());
  EXPECT_EQ(null_rot.status().code(), absl::StatusCode::kInvalidArgument);
}

// SmolLM2-135M (hidden 576 = 36 x 16, intermediate 1536 = 12 x 128): 24 tokens, the real
// weights dequantized from the Q4_1 GGUF.
TEST(SmolLmRotationTest, RotatedLogitsEqualUnrotated) {
  kernels::ThreadPool pool(2);
  auto backend = kernels::CreateCpuBackendOnPool(&pool);
  auto src = ModelSource::Open(testing::DefaultModelPath());
  ASSERT_TRUE(src.ok()) << src.status();
  std::vector<int32_t> tokens = Tokens(24, (*src)->config().vocab_size, 5);
  std::vector<float> want;
  {
    auto f32 = DequantizeToF32(**src);
    ASSERT_TRUE(f32.ok());
    auto m = LlamaModel::Create(*std::move(f32), backend.get());
    ASSERT_TRUE(m.ok());
    want = PrefillLogits(**m, tokens);
  }
  auto f32 = DequantizeToF32(**src);
  ASSERT_TRUE(f32.ok());
  src->reset();
  auto rot = RotateF32Model({1234, true, true}, f32->get());
  ASSERT_TRUE(rot.ok()) << rot.status();
  auto m = LlamaModel::CreateRotated(*std::move(f32), *rot, backend.get());
  ASSERT_TRUE(m.ok());
  const std::vector<float> got = PrefillLogits(**m, tokens);
  EXPECT_LT(RelativeMaxError(want, got), 2e-3);
  int same_top1 = 0;
  const int vocab = (*m)->config().vocab_size;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const auto a = std::max_element(want.begin() + t * vocab, want.begin() + (t + 1) * vocab);
    const auto b = std::max_element(got.begin() + t * vocab, got.begin() + (t + 1) * vocab);
    same_top1 += (a - want.begin()) == (b - got.begin());
  }
  EXPECT_EQ(same_top1, static_cast<int>(tokens.size()));
}

}  // namespace
}  // namespace loom
