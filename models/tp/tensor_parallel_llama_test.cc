// TensorParallelLlama against single-device references, in one batch of several sequences
// (prefill of different lengths, then greedy decode steps), with and without adapters:
// * W = 1 of the TP code is bitwise LlamaModel (same kernel sequence);
// * W = 2 and 4 on a synthetic F32 model (heads 4 / kv heads 2: SmolLM2's 9 / 3 do not
//   split in two) and W = 3 on SmolLM2's real config (F32 copy of its first layers) give
//   the same logits as W = 1 within float re-association error and the same tokens;
// * W = 3 on the real Q4_1 SmolLM2 (all 30 layers) agrees with W = 1 within the int8
//   activation-quantization noise that llama.cpp shows against itself (see below);
// * TP runs are deterministic; bad splits and bad plans are refused with a Status.
#include "models/tp/tensor_parallel_llama.h"

#include <cmath>
#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "models/llama/llama_model.h"
#include "models/testing/test_model.h"
#include "models/tokenizer/tokenizer.h"
#include "models/tp/synthetic_model.h"
#include "parallel/thread_communicator.h"

namespace loom {
namespace {

// One model (single-device or TP) behind the calls the generation loop needs.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual const LlamaConfig& config() const = 0;
  virtual int32_t NewSequence() = 0;
  virtual absl::Status Reserve(int32_t seq, int32_t n) = 0;
  virtual const PagedKvCache& plan_cache() const = 0;
  virtual absl::Status Forward(const BatchPlan& plan, float* logits) = 0;
};

KvCacheOptions SmallKv() {
  KvCacheOptions o;
  o.n_pages = 64;
  return o;
}

class LlamaRunner : public Runner {
 public:
  explicit LlamaRunner(std::unique_ptr<ModelSource> src) {
    backend_ = kernels::CreateCpuBackend(1);
    lora_ = kernels::CreateCpuLoraOps(nullptr);
    auto m = LlamaModel::Create(std::move(src), backend_.get(), lora_.get());
    EXPECT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
    auto kv = PagedKvCache::Create(model_->config(), SmallKv());
    EXPECT_TRUE(kv.ok()) << kv.status();
    kv_ = *std::move(kv);
  }
  const LlamaConfig& config() const override { return model_->config(); }
  int32_t NewSequence() override { return kv_->NewSequence(); }
  absl::Status Reserve(int32_t seq, int32_t n) override { return kv_->Reserve(seq, n); }
  const PagedKvCache& plan_cache() const override { return *kv_; }
  absl::Status Forward(const BatchPlan& plan, float* logits) override {
    return model_->Forward(plan, kv_.get(), &ws_, logits);
  }

 private:
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<kernels::LoraOps> lora_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<PagedKvCache> kv_;
  ForwardWorkspace ws_;
};

class TpRunner : public Runner {
 public:
  TpRunner(std::unique_ptr<ModelSource> src, int world) {
    std::vector<kernels::Backend*> be;
    std::vector<kernels::LoraOps*> lo;
    for (int r = 0; r < world; ++r) {
      backends_.push_back(kernels::CreateCpuBackend(1));
      lora_.push_back(kernels::CreateCpuLoraOps(nullptr));
      be.push_back(backends_.back().get());
      lo.push_back(lora_.back().get());
    }
    auto comms = CreateThreadCommunicators(world);
    EXPECT_TRUE(comms.ok()) << comms.status();
    auto m = TensorParallelLlama::Create(std::move(src), be, lo, *std::move(comms));
    EXPECT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
    auto kv = TpKvCache::Create(model_->config(), world, SmallKv());
    EXPECT_TRUE(kv.ok()) << kv.status();
    kv_ = *std::move(kv);
  }
  const LlamaConfig& config() const override { return model_->config(); }
  int32_t NewSequence() override { return kv_->NewSequence(); }
  absl::Status Reserve(int32_t seq, int32_t n) override { return kv_->Reserve(seq, n); }
  const PagedKvCache& plan_cache() const override { return kv_->plan_cache(); }
  absl::Status Forward(const BatchPlan& plan, float* logits) override {
    return model_->Forward(plan, kv_.get(), &ws_, logits);
  }
  TensorParallelLlama& model() { return *model_; }
  TpKvCache& kv() { return *kv_; }

 private:
  std::vector<std::unique_ptr<kernels::Backend>> backends_;
  std::vector<std::unique_ptr<kernels::LoraOps>> lora_;
  std::unique_ptr<TensorParallelLlama> model_;
  std::unique_ptr<TpKvCache> kv_;
  TpWorkspaces ws_;
};

// Logits of every step (rows in prompt order) and the greedy tokens of every sequence.
struct Trace {
  std::vector<float> logits;
  std::vector<std::vector<int32_t>> tokens;
};

int32_t Argmax(const float* x, int n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

// Prefills every prompt in one step, then decodes `steps` greedy tokens for all of them
// together; sequence i uses adapters[i] (nullptr: base model).
Trace Generate(Runner& run, const std::vector<std::vector<int32_t>>& prompts,
               const std::vector<const AdapterWeights*>& adapters, int steps) {
  const int vocab = run.config().vocab_size;
  const size_t n = prompts.size();
  std::vector<int32_t> seqs(n), pos(n, 0);
  std::vector<int32_t> next(n);
  Trace t;
  t.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) seqs[i] = run.NewSequence();
  for (int step = 0; step <= steps; ++step) {
    std::vector<SequenceChunk> chunks(n);
    for (size_t i = 0; i < n; ++i) {
      chunks[i].kv_seq = seqs[i];
      chunks[i].start_pos = pos[i];
      chunks[i].tokens = step == 0 ? prompts[i] : std::vector<int32_t>{next[i]};
      chunks[i].adapter = adapters[i];
      EXPECT_TRUE(run.Reserve(seqs[i], pos[i] + chunks[i].tokens.size()).ok());
    }
    auto plan = BatchPlan::Build(chunks, run.plan_cache(), vocab);
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return t;
    std::vector<float> logits(plan->logit_tokens().size() * vocab);
    absl::Status s = run.Forward(*plan, logits.data());
    EXPECT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < n; ++i) {
      const float* row = logits.data() + static_cast<size_t>(plan->logit_rows(i).first) * vocab;
      t.logits.insert(t.logits.end(), row, row + vocab);
      next[i] = Argmax(row, vocab);
      t.tokens[i].push_back(next[i]);
      pos[i] += static_cast<int32_t>(chunks[i].tokens.size());
    }
  }
  return t;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

float MaxAbs(const std::vector<float>& a) {
  float m = 0.0f;
  for (float x : a) m = std::max(m, std::fabs(x));
  return m;
}

bool Bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::vector<std::vector<int32_t>> Prompts(const std::vector<int>& lengths, int vocab,
                                          uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> p;
  for (int len : lengths) {
    std::vector<int32_t> t(len);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
    p.push_back(std::move(t));
  }
  return p;
}

LlamaConfig SyntheticConfig() {
  LlamaConfig c;
  c.name = "synthetic";
  c.vocab_size = 512;
  c.hidden = 128;
  c.intermediate = 256;
  c.n_layers = 3;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.head_dim = 16;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.max_context = 256;
  c.tied_embeddings = false;
  return c;
}

constexpr uint32_t kModelSeed = 11;
constexpr int kSteps = 6;

// Adapter set-ups: none, and a mixed batch (base, adapter A, adapter B).
struct Adapters {
  std::unique_ptr<testing::RandomLoraAdapter> a_full, b_full;
  std::unique_ptr<TpAdapter> a, b;
  Adapters(const LlamaConfig& c, int world, float scale) {
    a_full = std::make_unique<testing::RandomLoraAdapter>(c, 8, scale, 21);
    b_full = std::make_unique<testing::RandomLoraAdapter>(c, 4, scale, 22);
    auto ta = TpAdapter::Create(a_full.get(), c, world);
    auto tb = TpAdapter::Create(b_full.get(), c, world);
    EXPECT_TRUE(ta.ok() && tb.ok());
    a = *std::move(ta);
    b = *std::move(tb);
  }
  std::vector<const AdapterWeights*> Mixed() const { return {nullptr, a.get(), b.get()}; }
};

const std::vector<const AdapterWeights*> kNoAdapters = {nullptr, nullptr, nullptr};

TEST(TensorParallelLlamaTest, SingleRankIsBitwiseLlamaModel) {
  const LlamaConfig c = SyntheticConfig();
  const auto prompts = Prompts({5, 9, 3}, c.vocab_size, 1);
  const Adapters ad(c, 1, 0.1f);
  for (const auto& adapters : {kNoAdapters, ad.Mixed()}) {
    LlamaRunner ref(testing::SyntheticModel(c, DType::kF32, kModelSeed));
    TpRunner tp(testing::SyntheticModel(c, DType::kF32, kModelSeed), 1);
    const Trace want = Generate(ref, prompts, adapters, kSteps);
    const Trace got = Generate(tp, prompts, adapters, kSteps);
    EXPECT_TRUE(Bitwise(got.logits, want.logits));
    EXPECT_EQ(got.tokens, want.tokens);
  }
}

// Why 2e-4 of the largest logit: the split o/down sums differ from one rank's by float
// re-association only (measured with a 1-layer model: ~1e-6 on logits of ~4, a couple of
// ulps). From the second layer on, K/V computed from that residual stream are stored as
// FP16, and a last-bit change can round a K/V element to the neighbouring FP16 value
// (relative 2^-11 ~ 4.9e-4 of that element); attention averages that down. Measured: ~3e-5
// of the largest logit (synthetic, 3 layers) and ~1.4e-5 (SmolLM2, 4 layers); 2e-4 leaves a
// 7x margin and is far below a real change (an adapter moves logits by O(1), checked below).
constexpr float kF32RelTol = 2e-4f;

TEST(TensorParallelLlamaTest, SyntheticF32SplitsMatchOneRank) {
  const LlamaConfig c = SyntheticConfig();
  const auto prompts = Prompts({5, 9, 3}, c.vocab_size, 2);
  for (int world : {2, 4}) {
    const Adapters ad1(c, 1, 0.1f), adw(c, world, 0.1f);
    for (bool lora : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "W=" << world << " lora=" << lora);
      TpRunner one(testing::SyntheticModel(c, DType::kF32, kModelSeed), 1);
      TpRunner tp(testing::SyntheticModel(c, DType::kF32, kModelSeed), world);
      const Trace want = Generate(one, prompts, lora ? ad1.Mixed() : kNoAdapters, kSteps);
      const Trace got = Generate(tp, prompts, lora ? adw.Mixed() : kNoAdapters, kSteps);
      const float diff = MaxAbsDiff(got.logits, want.logits), scale = MaxAbs(want.logits);
      std::printf("synthetic F32 W=%d lora=%d: max |logit diff| %.3g (max |logit| %.3g)\n",
                  world, lora, diff, scale);
      EXPECT_LE(diff, kF32RelTol * scale);
      EXPECT_EQ(got.tokens, want.tokens);
    }
  }
}

// Q8_0 weights: column slices of o/down are whole blocks (64 and 128 wide per rank at W=2).
TEST(TensorParallelLlamaTest, SyntheticQ8SplitMatchesOneRankTokens) {
  const LlamaConfig c = SyntheticConfig();
  const auto prompts = Prompts({5, 9, 3}, c.vocab_size, 3);
  TpRunner one(testing::SyntheticModel(c, DType::kQ8_0, kModelSeed), 1);
  TpRunner two(testing::SyntheticModel(c, DType::kQ8_0, kModelSeed), 2);
  LlamaRunner ref(testing::SyntheticModel(c, DType::kQ8_0, kModelSeed));
  const Trace want = Generate(one, prompts, kNoAdapters, kSteps);
  const Trace got = Generate(two, prompts, kNoAdapters, kSteps);
  EXPECT_TRUE(Bitwise(Generate(ref, prompts, kNoAdapters, kSteps).logits, want.logits));
  const float diff = MaxAbsDiff(got.logits, want.logits), scale = MaxAbs(want.logits);
  std::printf("synthetic Q8_0 W=2: max |logit diff| %.3g (max |logit| %.3g)\n", diff, scale);
  EXPECT_LE(diff, 0.05f * scale);
  EXPECT_EQ(got.tokens, want.tokens);
}

TEST(TensorParallelLlamaTest, DeterministicAndAdapterMatters) {
  const LlamaConfig c = SyntheticConfig();
  const auto prompts = Prompts({4, 6, 2}, c.vocab_size, 4);
  const Adapters ad(c, 2, 0.1f);
  TpRunner x(testing::SyntheticModel(c, DType::kF32, kModelSeed), 2);
  TpRunner y(testing::SyntheticModel(c, DType::kF32, kModelSeed), 2);
  TpRunner z(testing::SyntheticModel(c, DType::kF32, kModelSeed), 2);
  const Trace a = Generate(x, prompts, ad.Mixed(), 3);
  const Trace b = Generate(y, prompts, ad.Mixed(), 3);
  EXPECT_TRUE(Bitwise(a.logits, b.logits));
  const Trace base = Generate(z, prompts, kNoAdapters, 3);
  EXPECT_GT(MaxAbsDiff(a.logits, base.logits), 0.1f);  // the adapter is not ignored
}

TEST(TensorParallelLlamaTest, RefusesBadSplitsAndPlans) {
  LlamaConfig c = SyntheticConfig();
  std::vector<kernels::Backend*> be;
  auto backend = kernels::CreateCpuBackend(1);
  for (int r = 0; r < 3; ++r) be.push_back(backend.get());
  auto comms = CreateThreadCommunicators(3);
  ASSERT_TRUE(comms.ok());
  auto m = TensorParallelLlama::Create(testing::SyntheticModel(c, DType::kF32, 1), be, {},
                                       *std::move(comms));
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("n_heads 8, n_kv_heads 4"), std::string::npos)
      << m.status();

  // A plan naming a plain adapter (not split), and a TP model without LoRA kernels.
  TpRunner tp(testing::SyntheticModel(c, DType::kF32, kModelSeed), 2);
  testing::RandomLoraAdapter plain(c, 4, 0.1f, 5);
  SequenceChunk ch;
  ch.kv_seq = tp.NewSequence();
  ch.tokens = {1, 2, 3};
  ch.adapter = &plain;
  ASSERT_TRUE(tp.Reserve(ch.kv_seq, 3).ok());
  auto plan = BatchPlan::Build({ch}, tp.plan_cache(), c.vocab_size);
  ASSERT_TRUE(plan.ok());
  std::vector<float> logits(c.vocab_size);
  absl::Status s = tp.Forward(*plan, logits.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // The refusal happened before any collective: the group still works.
  ch.adapter = nullptr;
  plan = BatchPlan::Build({ch}, tp.plan_cache(), c.vocab_size);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(tp.Forward(*plan, logits.data()).ok());
}

// Fault injection: rank 1's endpoint fails its 5th collective without entering it. The
// rank aborts the group, so rank 0 (blocked in that collective, with a 10-minute timeout)
// returns at once; Forward reports the injected error, not a timeout.
class FailingCommunicator : public Communicator {
 public:
  FailingCommunicator(std::unique_ptr<Communicator> inner, int fail_at)
      : inner_(std::move(inner)), fail_at_(fail_at) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduceSum(float* buf, size_t n) override {
    if (++calls_ == fail_at_) return absl::InternalError("injected failure");
    return inner_->AllReduceSum(buf, n);
  }
  absl::Status AllGather(const float* in, size_t n, float* out) override {
    if (++calls_ == fail_at_) return absl::InternalError("injected failure");
    return inner_->AllGather(in, n, out);
  }
  absl::Status Broadcast(float* buf, size_t n, int root) override {
    return inner_->Broadcast(buf, n, root);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }
  void Abort(const absl::Status& reason) override { inner_->Abort(reason); }

 private:
  std::unique_ptr<Communicator> inner_;
  int fail_at_;
  int calls_ = 0;
};

TEST(TensorParallelLlamaTest, RankFailureIsAStatusNotAHang) {
  const LlamaConfig c = SyntheticConfig();
  ThreadCommunicatorOptions o;
  o.timeout = absl::Minutes(10);
  auto comms = CreateThreadCommunicators(2, o);
  ASSERT_TRUE(comms.ok());
  (*comms)[1] = std::make_unique<FailingCommunicator>(std::move((*comms)[1]), 5);
  auto b0 = kernels::CreateCpuBackend(1), b1 = kernels::CreateCpuBackend(1);
  auto m = TensorParallelLlama::Create(testing::SyntheticModel(c, DType::kF32, kModelSeed),
                                       {b0.get(), b1.get()}, {}, *std::move(comms));
  ASSERT_TRUE(m.ok()) << m.status();
  auto kv = TpKvCache::Create(c, 2, SmallKv());
  ASSERT_TRUE(kv.ok());
  SequenceChunk ch;
  ch.kv_seq = (*kv)->NewSequence();
  ch.tokens = {1, 2, 3, 4};
  ASSERT_TRUE((*kv)->Reserve(ch.kv_seq, 4).ok());
  auto plan = BatchPlan::Build({ch}, (*kv)->plan_cache(), c.vocab_size);
  ASSERT_TRUE(plan.ok());
  TpWorkspaces ws;
  std::vector<float> logits(c.vocab_size);
  const absl::Status s = (*m)->Forward(*plan, kv->get(), &ws, logits.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("injected failure"), std::string::npos) << s;
}

// ---- the real SmolLM2-135M (9 heads, 3 kv heads: W = 3) ----

std::unique_ptr<ModelSource> OpenDefault() {
  auto src = ModelSource::Open(testing::DefaultModelPath());
  EXPECT_TRUE(src.ok()) << src.status();
  return src.ok() ? *std::move(src) : nullptr;
}

TEST(TensorParallelLlamaTest, SmolLm2RefusesTwoRanks) {
  auto src = OpenDefault();
  ASSERT_NE(src, nullptr);
  const absl::Status s =
      CheckTensorParallelSplit(src->config(), 2, DType::kQ4_1, DType::kQ4_1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_heads 9, n_kv_heads 3"), std::string::npos) << s;
}

// F32 copy of the first 4 layers: same bound and reason as the synthetic F32 test.
TEST(TensorParallelLlamaTest, SmolLm2F32ThreeRanksMatchOneRank) {
  auto q = OpenDefault();
  ASSERT_NE(q, nullptr);
  const LlamaConfig& c = q->config();
  const auto prompts = Prompts({7, 12, 4}, c.vocab_size, 5);
  const Adapters ad1(c, 1, 0.05f), ad3(c, 3, 0.05f);
  for (bool lora : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "lora=" << lora);
    TpRunner one(testing::TruncatedF32Copy(*q, 4), 1);
    TpRunner three(testing::TruncatedF32Copy(*q, 4), 3);
    const Trace want = Generate(one, prompts, lora ? ad1.Mixed() : kNoAdapters, 4);
    const Trace got = Generate(three, prompts, lora ? ad3.Mixed() : kNoAdapters, 4);
    const float diff = MaxAbsDiff(got.logits, want.logits), scale = MaxAbs(want.logits);
    std::printf("SmolLM2 F32 4 layers W=3 lora=%d: max |logit diff| %.3g (max |logit| %.3g)\n",
                lora, diff, scale);
    EXPECT_LE(diff, kF32RelTol * scale);
    EXPECT_EQ(got.tokens, want.tokens);
  }
}

// Teacher-forced logits of every position of `texts` (one step, all logits), rows in text
// order.
std::vector<float> Score(Runner& run, const std::vector<std::vector<int32_t>>& texts,
                         const std::vector<const AdapterWeights*>& adapters) {
  const int vocab = run.config().vocab_size;
  std::vector<SequenceChunk> chunks(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    chunks[i].kv_seq = run.NewSequence();
    chunks[i].tokens = texts[i];
    chunks[i].logits = SequenceChunk::Logits::kAll;
    chunks[i].adapter = adapters[i];
    EXPECT_TRUE(run.Reserve(chunks[i].kv_seq, texts[i].size()).ok());
  }
  auto plan = BatchPlan::Build(chunks, run.plan_cache(), vocab);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  std::vector<float> logits(plan->logit_tokens().size() * vocab);
  absl::Status s = run.Forward(*plan, logits.data());
  EXPECT_TRUE(s.ok()) << s;
  std::vector<float> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    out.insert(out.end(), logits.begin() + plan->logit_rows(i).first * vocab,
               logits.begin() + plan->logit_rows(i).second * vocab);
  }
  return out;
}

std::vector<std::vector<int32_t>> EnglishTexts(const ModelSource& src) {
  auto tok = Tokenizer::Create(src.vocabulary());
  EXPECT_TRUE(tok.ok()) << tok.status();
  std::vector<std::vector<int32_t>> out;
  for (const char* text :
       {"It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife.",
        "The capital of France is Paris. The capital of Germany is Berlin. The capital of "
        "Italy is",
        "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) +"}) {
    auto ids = (*tok)->Encode(text, /*add_bos=*/false);
    EXPECT_TRUE(ids.ok()) << ids.status();
    out.push_back(*ids);
  }
  return out;
}

// The real Q4_1 model, all 30 layers. W = 1 is bitwise LlamaModel (scoring and greedy
// generation). At W = 3 the split o/down sums differ in the last float bits, and the next
// projection's int8 activation quantization (llama.cpp's Q8_1 scheme) can then round an
// element to the neighbouring step; over 30 layers that grows far beyond float error -- the
// same effect that makes llama.cpp disagree with itself (whole prompt vs token by token) on
// 4.7% of top-1 tokens with a max logit difference of 2.58 (README). So this test holds
// TP=3 to that floor, not to float tolerance: top-1 agreement >= 90% of positions and a max
// difference within 2.58 x 2 (measured values printed).
TEST(TensorParallelLlamaTest, SmolLm2Q4ThreeRanksAgreeWithinQuantizationNoise) {
  auto probe = OpenDefault();
  ASSERT_NE(probe, nullptr);
  const LlamaConfig c = probe->config();
  const auto texts = EnglishTexts(*probe);
  const auto prompts = Prompts({6, 10, 3}, c.vocab_size, 6);
  const Adapters ad1(c, 1, 0.05f), ad3(c, 3, 0.05f);
  for (bool lora : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "lora=" << lora);
    const auto& a1 = lora ? ad1.Mixed() : kNoAdapters;
    LlamaRunner ref(OpenDefault());
    TpRunner one(OpenDefault(), 1);
    TpRunner three(OpenDefault(), 3);
    const std::vector<float> r = Score(ref, texts, a1);
    const std::vector<float> want = Score(one, texts, a1);
    const std::vector<float> got = Score(three, texts, lora ? ad3.Mixed() : kNoAdapters);
    EXPECT_TRUE(Bitwise(want, r));
    const size_t rows = want.size() / c.vocab_size;
    size_t agree = 0;
    for (size_t i = 0; i < rows; ++i) {
      agree += Argmax(got.data() + i * c.vocab_size, c.vocab_size) ==
               Argmax(want.data() + i * c.vocab_size, c.vocab_size);
    }
    const float diff = MaxAbsDiff(got, want);
    std::printf("SmolLM2 Q4_1 30 layers W=3 lora=%d: top-1 agreement %zu/%zu, max |logit "
                "diff| %.3g (max |logit| %.3g)\n",
                lora, agree, rows, diff, MaxAbs(want));
    EXPECT_GE(agree, rows * 9 / 10);
    EXPECT_LE(diff, 2 * 2.58f);
    // Greedy generation: W = 1 bitwise LlamaModel.
    LlamaRunner ref_gen(OpenDefault());
    TpRunner one_gen(OpenDefault(), 1);
    const Trace rg = Generate(ref_gen, prompts, a1, 3);
    const Trace og = Generate(one_gen, prompts, a1, 3);
    EXPECT_TRUE(Bitwise(og.logits, rg.logits));
    EXPECT_EQ(og.tokens, rg.tokens);
  }
}

}  // namespace
}  // namespace loom
