// Perplexity on the real SmolLM2 model: English scores far better than the same tokens
// shuffled; the split prefix/scored forward equals one whole-window step; a zero LoRA
// leaves the result unchanged and a non-zero one changes it; the F32-dequantized model
// agrees with the Q4_1 one to within quantization noise.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"
#include "kernels/kv_quant.h"
#include "models/eval/f32_model_source.h"
#include "models/eval/perplexity.h"
#include "models/lora/lora_adapter.h"
#include "models/testing/test_model.h"
#include "scheduler/engine/lora_adapter_weights.h"

namespace loom {
namespace {

constexpr char kEnglish[] =
    "The village stood at the edge of a wide valley, where the river turned slowly toward "
    "the sea. Every morning the baker opened his shop before the sun had risen, and the smell "
    "of fresh bread drifted down the narrow street. Children walked to school in small "
    "groups, talking about the games they would play in the afternoon. Their parents went to "
    "work in the fields or in the town across the bridge. In the evening, when the light "
    "began to fade, families sat together at the table and shared the news of the day. The "
    "old teacher, who had lived in the village for more than forty years, liked to say that "
    "nothing ever changed there, and yet every season brought something new. In spring the "
    "orchards were white with blossom; in summer the hills were golden and dry; in autumn "
    "the leaves fell into the river and were carried away; and in winter the snow covered "
    "the roofs and the roads, so that the whole valley seemed to sleep. People who visited "
    "for a week often stayed for a year, and some of them never left at all.";

class PerplexityModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pool_ = new kernels::ThreadPool(2);
    backend_ = kernels::CreateCpuBackendOnPool(pool_).release();
    lora_ = kernels::CreateCpuLoraOps(pool_).release();
    auto src = ModelSource::Open(testing::DefaultModelPath());
    ASSERT_TRUE(src.ok()) << src.status();
    auto tok = Tokenizer::Create((*src)->vocabulary());
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
    auto m = LlamaModel::Create(*std::move(src), backend_, lora_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokenizer_;
    delete lora_;
    delete backend_;
    delete pool_;
  }
  static PerplexityOptions Small() {
    PerplexityOptions o;
    o.context = 128;
    o.stride = 64;
    return o;
  }

  static kernels::ThreadPool* pool_;
  static kernels::Backend* backend_;
  static kernels::LoraOps* lora_;
  static Tokenizer* tokenizer_;
  static LlamaModel* model_;
};
kernels::ThreadPool* PerplexityModelTest::pool_ = nullptr;
kernels::Backend* PerplexityModelTest::backend_ = nullptr;
kernels::LoraOps* PerplexityModelTest::lora_ = nullptr;
Tokenizer* PerplexityModelTest::tokenizer_ = nullptr;
LlamaModel* PerplexityModelTest::model_ = nullptr;

TEST_F(PerplexityModelTest, EnglishBeatsShuffledTokens) {
  auto ids = tokenizer_->Encode(kEnglish, false);
  ASSERT_TRUE(ids.ok());
  ASSERT_GT(ids->size(), 200u);
  auto r = ComputePerplexity(*model_, *tokenizer_, kEnglish, Small());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text_tokens, static_cast<int64_t>(ids->size()));
  EXPECT_EQ(r->tokens_scored, r->text_tokens - 64);
  EXPECT_TRUE(std::isfinite(r->ppl));
  EXPECT_GT(r->ppl, 1.0);
  EXPECT_LT(r->ppl, 60.0) << "plain English should be easy for a 135M model";

  std::vector<int32_t> shuffled = *ids;
  std::mt19937 rng(7);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  auto src = LlamaWindowLogits(*model_, 128, nullptr);
  ASSERT_TRUE(src.ok());
  auto s = ComputePerplexityOfTokens(shuffled, **src, Small());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(std::isfinite(s->ppl));
  EXPECT_GT(s->ppl, 5 * r->ppl) << "english " << r->ppl << " shuffled " << s->ppl;
}

// The model over an INT8 / INT4-asymmetric KV cache: the option reaches the attention
// (the result differs from FP16's) and costs little perplexity (1% and 10% bounds; the
// measured figures on 10k held-out tokens are in the README).
TEST_F(PerplexityModelTest, QuantizedKvCacheStaysCloseToFp16) {
  PerplexityOptions o = Small();
  auto f16 = ComputePerplexity(*model_, *tokenizer_, kEnglish, o);
  ASSERT_TRUE(f16.ok()) << f16.status();
  for (auto [dtype, bound] : {std::pair{kernels::KvDtype::kInt8, 0.01},
                              std::pair{kernels::KvDtype::kInt4, 0.10}}) {
    o.kv_dtype = dtype;
    auto q = ComputePerplexity(*model_, *tokenizer_, kEnglish, o);
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_NE(q->nll, f16->nll) << kernels::KvDtypeName(dtype);
    EXPECT_LT(std::fabs(q->ppl / f16->ppl - 1.0), bound)
        << kernels::KvDtypeName(dtype) << " " << q->ppl << " vs f16 " << f16->ppl;
    std::printf("kv %s: ppl %.4f (f16 %.4f)\n", std::string(kernels::KvDtypeName(dtype)).c_str(),
                q->ppl, f16->ppl);
  }
}

TEST_F(PerplexityModelTest, SplitWindowEqualsOneStep) {
  // Reference: each window as ONE forward step with logits for every token, scored by hand.
  auto ids = tokenizer_->Encode(kEnglish, false);
  ASSERT_TRUE(ids.ok());
  const PerplexityOptions o = Small();
  auto r = ComputePerplexity(*model_, *tokenizer_, kEnglish, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const int vocab = model_->config().vocab_size;
  KvCacheOptions kvo;
  kvo.n_pages = 16;
  auto kv = PagedKvCache::Create(model_->config(), kvo);
  ASSERT_TRUE(kv.ok());
  ForwardWorkspace ws;
  const std::vector<EvalWindow> windows = PlanWindows(ids->size(), o.context, o.stride);
  ASSERT_EQ(windows.size(), r->windows.size());
  for (size_t w = 0; w < windows.size(); ++w) {
    SequenceChunk c;
    c.kv_seq = (*kv)->NewSequence();
    c.tokens.assign(ids->begin() + windows[w].start, ids->begin() + windows[w].end);
    c.logits = SequenceChunk::Logits::kAll;
    ASSERT_TRUE((*kv)->Reserve(c.kv_seq, c.tokens.size()).ok());
    auto plan = BatchPlan::Build({c}, **kv, vocab);
    ASSERT_TRUE(plan.ok());
    std::vector<float> logits(c.tokens.size() * vocab);
    ASSERT_TRUE(model_->Forward(*plan, kv->get(), &ws, logits.data()).ok());
    double nll = 0;
    for (size_t p = windows[w].first_scored; p < c.tokens.size(); ++p) {
      nll += TokenNll(logits.data() + (p - 1) * vocab, vocab, c.tokens[p]);
    }
    (*kv)->Release(c.kv_seq);
    EXPECT_EQ(r->windows[w].nll_sum, nll) << "window " << w;  // batch-invariant forward
  }
}

TEST_F(PerplexityModelTest, Adapters) {
  const LlamaConfig& cfg = model_->config();
  std::vector<LoraProjectionInfo> infos;
  for (int l = 0; l < cfg.n_layers; ++l) {
    const ProjectionShape sh = BaseProjectionShape(cfg, LoraTarget::kV);
    infos.push_back({l, LoraTarget::kV, 8, 2.0f, sh.h_in, sh.h_out});
  }
  auto adapter = LoraAdapter::Create("zero", "test", AdapterFormat::kInMemory, cfg.n_layers, infos);
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  LoraAdapterWeights view(adapter->get());
  PerplexityOptions o = Small();
  auto base = ComputePerplexity(*model_, *tokenizer_, kEnglish, o);
  ASSERT_TRUE(base.ok());
  o.adapter = &view;
  auto zero = ComputePerplexity(*model_, *tokenizer_, kEnglish, o);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->nll, base->nll) << "a LoRA with B = 0 adds exactly nothing";

  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 0.05f);
  for (size_t i = 0; i < infos.size(); ++i) {
    for (int k = 0; k < infos[i].rank * infos[i].h_in; ++k) (*adapter)->mutable_a(i)[k] = Fp32ToBf16(g(rng));
    for (int k = 0; k < infos[i].h_out * infos[i].rank; ++k) (*adapter)->mutable_b(i)[k] = Fp32ToBf16(g(rng));
  }
  auto noisy = ComputePerplexity(*model_, *tokenizer_, kEnglish, o);
  ASSERT_TRUE(noisy.ok()) << noisy.status();
  EXPECT_TRUE(std::isfinite(noisy->ppl));
  EXPECT_NE(noisy->nll, base->nll);

  auto no_lora = LlamaModel::Create(*ModelSource::Open(testing::DefaultModelPath()), backend_);
  ASSERT_TRUE(no_lora.ok());
  EXPECT_EQ(ComputePerplexity(**no_lora, *tokenizer_, kEnglish, o).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(PerplexityModelTest, DequantizedF32IsClose) {
  auto q = ModelSource::Open(testing::DefaultModelPath());
  ASSERT_TRUE(q.ok());
  auto f32 = DequantizeToF32(**q);
  ASSERT_TRUE(f32.ok()) << f32.status();
  for (const auto& [name, t] : (*f32)->tensors()) ASSERT_EQ(t.dtype, DType::kF32) << name;
  auto m = LlamaModel::Create(*std::move(f32), backend_);
  ASSERT_TRUE(m.ok()) << m.status();
  auto a = ComputePerplexity(*model_, *tokenizer_, kEnglish, Small());
  auto b = ComputePerplexity(**m, *tokenizer_, kEnglish, Small());
  ASSERT_TRUE(a.ok() && b.ok());
  // Same weights; only the int8 activation quantization of the Q4_1 path differs.
  EXPECT_NE(a->nll, b->nll);
  EXPECT_NEAR(b->nll, a->nll, 0.05) << "q4_1 " << a->ppl << " f32 " << b->ppl;
}

}  // namespace
}  // namespace loom
