// The engine on the real SmolLM2 model with real (synthetic, PEFT-format) adapters:
// concurrent streams equal the same requests run alone; preemption under KV pressure
// loses nothing; cancellation frees pages; unloading drains; errors are clear.
#include "scheduler/engine/engine.h"

#include <cstdlib>
#include <filesystem>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "models/lora/peft_writer.h"
#include "models/testing/test_model.h"
#include "models/tokenizer/tokenizer.h"
#include "models/weights/model_source.h"

namespace loom {
namespace {

// Collects one request's stream.
struct Collector {
  absl::Mutex mu;
  std::string text;
  std::vector<int32_t> tokens;
  bool done = false;
  StreamEvent final;
  int events = 0;

  StreamCallback Callback() {
    return [this](const StreamEvent& e) {
      absl::MutexLock l(&mu);
      text += e.text;
      tokens.insert(tokens.end(), e.token_ids.begin(), e.token_ids.end());
      ++events;
      if (e.finished) {
        done = true;
        final = e;
      }
    };
  }
  void Wait() {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(&done));
  }
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pool_ = new kernels::ThreadPool(2);
    backend_ = kernels::CreateCpuBackendOnPool(pool_).release();
    lora_ = kernels::CreateCpuLoraOps(pool_).release();
    auto src = ModelSource::Open(testing::DefaultModelPath());
    ASSERT_TRUE(src.ok()) << src.status();
    vocab_ = new Vocabulary((*src)->vocabulary());
    auto tok = Tokenizer::Create(*vocab_);
    ASSERT_TRUE(tok.ok());
    tokenizer_ = tok->release();
    auto m = LlamaModel::Create(*std::move(src), backend_, lora_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = m->release();
    // Two synthetic rank-8 and rank-16 adapters on all seven projections.
    dir_ = new std::string(std::string(std::getenv("TEST_TMPDIR")) + "/adapters");
    for (int i = 0; i < 2; ++i) {
      SyntheticAdapterSpec spec;
      spec.rank = i == 0 ? 8 : 16;
      spec.alpha = 2.0f * spec.rank;
      spec.seed = 100 + i;
      spec.dtype = DType::kBF16;
      auto a = MakeSyntheticAdapter(model_->config(), spec);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(WritePeftAdapter(*a, *dir_ + "/a" + std::to_string(i)).ok());
    }
  }

  void SetUp() override {
    store_ = std::make_unique<AdapterStore>(model_->config(), AdapterStore::Options());
    ASSERT_TRUE(store_->Register("a0", *dir_ + "/a0").ok());
    ASSERT_TRUE(store_->Register("a1", *dir_ + "/a1").ok());
  }

  std::unique_ptr<Engine> MakeEngine(EngineOptions o = EngineOptions()) {
    if (o.kv.n_pages == 0) o.kv.n_pages = 256;
    auto e = Engine::Create(model_, tokenizer_, store_.get(), nullptr, o);
    EXPECT_TRUE(e.ok()) << e.status();
    return *std::move(e);
  }

  static EngineRequest Request(const std::string& text, const std::string& adapter,
                               int max_tokens) {
    EngineRequest r;
    r.prompt = *tokenizer_->Encode(text, false);
    r.adapter_id = adapter;
    r.max_tokens = max_tokens;
    return r;
  }

  static inline kernels::Backend* backend_ = nullptr;
  static inline kernels::ThreadPool* pool_ = nullptr;
  static inline kernels::LoraOps* lora_ = nullptr;
  static inline Vocabulary* vocab_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline LlamaModel* model_ = nullptr;
  static inline std::string* dir_ = nullptr;
  std::unique_ptr<AdapterStore> store_;
};

const char* kPrompts[] = {
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "My favourite book is",
};

TEST_F(EngineTest, ConcurrentMixedAdapterStreamsMatchRunningAlone) {
  std::unique_ptr<Engine> engine = MakeEngine();
  const std::string adapters[] = {"", "a0", "a1"};
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 9; ++i) reqs.push_back(Request(kPrompts[i % 6], adapters[i % 3], 12));
  std::vector<std::string> alone(reqs.size());
  std::vector<std::vector<int32_t>> alone_tokens(reqs.size());
  std::vector<FinishReason> alone_reason(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    Collector c;
    ASSERT_TRUE(engine->Submit(reqs[i], c.Callback()).ok());
    c.Wait();
    ASSERT_TRUE(c.final.error.ok()) << c.final.error;
    alone[i] = c.text;
    alone_tokens[i] = c.tokens;
    alone_reason[i] = c.final.finish_reason;
  }
  // The adapters really change the output.
  EXPECT_NE(alone_tokens[0], alone_tokens[1]);
  EXPECT_NE(alone_tokens[1], alone_tokens[2]);
  std::vector<std::unique_ptr<Collector>> cs;
  for (size_t i = 0; i < reqs.size(); ++i) {
    cs.push_back(std::make_unique<Collector>());
    ASSERT_TRUE(engine->Submit(reqs[i], cs.back()->Callback()).ok());
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    cs[i]->Wait();
    EXPECT_EQ(cs[i]->tokens, alone_tokens[i]) << "request " << i;
    EXPECT_EQ(cs[i]->text, alone[i]) << "request " << i;
    EXPECT_EQ(cs[i]->final.finish_reason, alone_reason[i]);
    EXPECT_EQ(cs[i]->final.completion_tokens, static_cast<int>(alone_tokens[i].size()));
  }
  EXPECT_GT(engine->GetStats().steps, 0);
}

TEST_F(EngineTest, PreemptionUnderKvPressureLosesNoToken) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Request(kPrompts[i], i % 2 ? "a0" : "", 40));
  std::vector<std::vector<int32_t>> alone;
  {
    std::unique_ptr<Engine> engine = MakeEngine();
    for (auto& r : reqs) {
      Collector c;
      ASSERT_TRUE(engine->Submit(r, c.Callback()).ok());
      c.Wait();
      alone.push_back(c.tokens);
    }
  }
  EngineOptions o;
  o.kv.n_pages = 10;  // 160 token slots for 6 x ~50 tokens
  std::unique_ptr<Engine> engine = MakeEngine(o);
  std::vector<std::unique_ptr<Collector>> cs;
  for (auto& r : reqs) {
    cs.push_back(std::make_unique<Collector>());
    ASSERT_TRUE(engine->Submit(r, cs.back()->Callback()).ok());
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    cs[i]->Wait();
    ASSERT_TRUE(cs[i]->final.error.ok()) << cs[i]->final.error;
    EXPECT_EQ(cs[i]->tokens, alone[i]) << "request " << i;
  }
  EXPECT_GT(engine->GetStats().preemptions, 0);
  // Stats are published at the end of the step that delivered the final events.
  for (int i = 0; i < 100 && engine->GetStats().kv_pages_used != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(engine->GetStats().kv_pages_used, 0);
}

TEST_F(EngineTest, CancelFreesPages) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Collector c;
  absl::Notification first;
  std::atomic<bool> notified{false};
  auto cb = c.Callback();
  auto id = engine->Submit(Request(kPrompts[1], "", 500), [&](const StreamEvent& e) {
    cb(e);
    if (!notified.exchange(true)) first.Notify();
  });
  ASSERT_TRUE(id.ok());
  first.WaitForNotification();
  EXPECT_GT(engine->GetStats().kv_pages_used, 0);
  engine->Cancel(*id);
  c.Wait();
  EXPECT_EQ(c.final.error.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(c.final.completion_tokens, 500);
  // Pages are returned at the step that handles the cancel.
  for (int i = 0; i < 100 && engine->GetStats().kv_pages_used != 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(engine->GetStats().kv_pages_used, 0);
}

TEST_F(EngineTest, UnloadDrainsRunningStreamThenRefuses) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Collector c;
  ASSERT_TRUE(engine->Submit(Request(kPrompts[0], "a1", 20), c.Callback()).ok());
  ASSERT_TRUE(store_->Unload("a1").ok());
  c.Wait();
  EXPECT_TRUE(c.final.error.ok()) << c.final.error;
  EXPECT_EQ(c.final.completion_tokens, 20);
  auto again = engine->Submit(Request(kPrompts[0], "a1", 5), Collector().Callback());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, BadRequestsAreRefusedClearly) {
  EngineOptions o;
  o.max_queued = 1;
  std::unique_ptr<Engine> engine = MakeEngine(o);
  EngineRequest r = Request(kPrompts[0], "", 5);
  r.prompt.clear();
  EXPECT_EQ(engine->Submit(r, nullptr).status().code(), absl::StatusCode::kInvalidArgument);

  r = Request(kPrompts[0], "", model_->config().max_context);
  absl::Status s = engine->Submit(r, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(std::to_string(model_->config().max_context)), std::string::npos)
      << s;

  r = Request(kPrompts[0], "no-such-adapter", 5);
  EXPECT_EQ(engine->Submit(r, nullptr).status().code(), absl::StatusCode::kNotFound);

  r = Request(kPrompts[0], "", 5);
  r.sampling.top_p = 1.5f;
  s = engine->Submit(r, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("top_p"), std::string::npos) << s;

  r = Request(kPrompts[0], "", 5);
  r.prompt.push_back(model_->config().vocab_size);
  EXPECT_EQ(engine->Submit(r, nullptr).status().code(), absl::StatusCode::kInvalidArgument);

  // Queue of 1: a burst of submissions overflows before the engine drains it.
  int exhausted = 0;
  std::vector<std::unique_ptr<Collector>> cs;
  for (int i = 0; i < 20; ++i) {
    cs.push_back(std::make_unique<Collector>());
    auto id = engine->Submit(Request(kPrompts[2], "", 2), cs.back()->Callback());
    if (!id.ok()) {
      EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted);
      ++exhausted;
      cs.pop_back();
    }
  }
  EXPECT_GT(exhausted, 0);
  for (auto& c : cs) c->Wait();
}

TEST_F(EngineTest, DeadlineEndsRequest) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Collector c;
  EngineRequest r = Request(kPrompts[1], "", 500);
  r.deadline = absl::Now() + absl::Milliseconds(300);
  ASSERT_TRUE(engine->Submit(r, c.Callback()).ok());
  c.Wait();
  EXPECT_EQ(c.final.error.code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace loom
