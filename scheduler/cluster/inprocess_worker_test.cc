// InProcessWorker on the real SmolLM2 model: its tokens equal the engine's for the same
// request; re-adding with context = prompt + the first k generated tokens continues with
// exactly the rest of the unsplit run (greedy, and seeded sampling via generated_before);
// end-of-generation, logprobs, cancellation, on-demand adapters, load and errors.
#include "scheduler/cluster/inprocess_worker.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "scheduler/cluster/worker_test_support.h"

namespace loom {
namespace {

using testing::EngineTokens;
using testing::RunToEnd;
using testing::WorkerWorld;

class InProcessWorkerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto w = WorkerWorld::Create(std::string(std::getenv("TEST_TMPDIR")) + "/adapters");
    ASSERT_TRUE(w.ok()) << w.status();
    world_ = w->release();
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
  }

  InProcessWorkerOptions Options() const {
    InProcessWorkerOptions o;
    o.adapters = world_->store.get();
    o.max_batch_size = world_->engine_options.max_running;
    return o;
  }

  static WorkerRequest Request(const std::string& text, int max_new_tokens) {
    WorkerRequest r;
    r.context = testing::Encode(*world_, text);
    r.max_new_tokens = max_new_tokens;
    r.stop_at_end_of_generation = false;
    return r;
  }

  // Re-adds `r` after its first k tokens of `whole`, as the frontend does on migration.
  static WorkerRequest Resumed(WorkerRequest r, const std::vector<int32_t>& whole, int k) {
    r.context.insert(r.context.end(), whole.begin(), whole.begin() + k);
    r.max_new_tokens -= k;
    r.generated_before = k;
    return r;
  }

  static inline WorkerWorld* world_ = nullptr;
};

TEST_F(InProcessWorkerTest, GreedyTokensEqualTheEngines) {
  InProcessWorker worker(world_->engine.get(), Options());
  for (const char* text : {"The capital of France is", "def fibonacci(n):"}) {
    const WorkerRequest r = Request(text, 20);
    absl::StatusOr<std::vector<int32_t>> reference = EngineTokens(world_->engine.get(), r);
    ASSERT_TRUE(reference.ok()) << reference.status();
    ASSERT_EQ(reference->size(), 20u);
    auto c = RunToEnd(&worker, r);
    ASSERT_TRUE(c->final_event().error.ok()) << c->final_event().error;
    EXPECT_EQ(c->tokens(), *reference) << text;
    EXPECT_EQ(c->finished_events(), 1);
    EXPECT_FALSE(c->event_after_final());
    EXPECT_FALSE(c->final_event().end_of_generation);  // max_new_tokens ended it
    EXPECT_GT(c->events(), 1);                          // streamed, not one lump
  }
}

TEST_F(InProcessWorkerTest, ReAddAfterKTokensContinuesTheUnsplitRun) {
  InProcessWorker worker(world_->engine.get(), Options());
  const WorkerRequest r = Request("Once upon a time, in a small village,", 24);
  auto whole = RunToEnd(&worker, r);
  ASSERT_TRUE(whole->final_event().error.ok());
  const std::vector<int32_t> all = whole->tokens();
  ASSERT_EQ(all.size(), 24u);
  for (int k : {1, 9, 23}) {
    auto rest = RunToEnd(&worker, Resumed(r, all, k));
    ASSERT_TRUE(rest->final_event().error.ok()) << rest->final_event().error;
    EXPECT_EQ(rest->tokens(), std::vector<int32_t>(all.begin() + k, all.end())) << "k=" << k;
  }
}

TEST_F(InProcessWorkerTest, SeededRequestResumedWithGeneratedBeforeMatchesUnsplit) {
  InProcessWorker worker(world_->engine.get(), Options());
  WorkerRequest r = Request("My favourite book is", 24);
  r.sampling.temperature = 1.5f;
  r.sampling.top_p = 0.95f;
  r.sampling.has_seed = true;
  r.sampling.seed = 31337;
  auto whole = RunToEnd(&worker, r);
  ASSERT_TRUE(whole->final_event().error.ok());
  const std::vector<int32_t> all = whole->tokens();
  ASSERT_EQ(all.size(), 24u);
  // Really sampled: greedy gives something else.
  WorkerRequest greedy = r;
  greedy.sampling = SamplingOptions();
  EXPECT_NE(RunToEnd(&worker, greedy)->tokens(), all);
  for (int k : {1, 10}) {
    auto rest = RunToEnd(&worker, Resumed(r, all, k));
    ASSERT_TRUE(rest->final_event().error.ok());
    EXPECT_EQ(rest->tokens(), std::vector<int32_t>(all.begin() + k, all.end())) << "k=" << k;
  }
  // Without generated_before the resumed sampler restarts its sequence and diverges.
  WorkerRequest restart = Resumed(r, all, 10);
  restart.generated_before = 0;
  EXPECT_NE(RunToEnd(&worker, restart)->tokens(),
            std::vector<int32_t>(all.begin() + 10, all.end()));
}

TEST_F(InProcessWorkerTest, EndOfGenerationTokenEndsAndIsFlagged) {
  InProcessWorker worker(world_->engine.get(), Options());
  absl::StatusOr<std::vector<int32_t>> chat = world_->model->chat->Render(
      {{"user", "What is 2 + 2?"}}, /*add_generation_prompt=*/true);
  ASSERT_TRUE(chat.ok());
  // Reference: the free-running greedy output, in which the turn ends at `end`.
  WorkerRequest r;
  r.context = *chat;
  r.max_new_tokens = 160;
  r.stop_at_end_of_generation = false;
  auto free_run = RunToEnd(&worker, r);
  ASSERT_TRUE(free_run->final_event().error.ok());
  EXPECT_FALSE(free_run->final_event().end_of_generation);
  const std::vector<int32_t> all = free_run->tokens();
  const std::vector<int32_t>& eog = world_->model->tokenizer->end_of_generation_ids();
  const auto end = std::find_first_of(all.begin(), all.end(), eog.begin(), eog.end());
  ASSERT_NE(end, all.end()) << "the model did not end its turn in 160 tokens";
  r.stop_at_end_of_generation = true;
  auto c = RunToEnd(&worker, r);
  ASSERT_TRUE(c->final_event().error.ok());
  EXPECT_TRUE(c->final_event().end_of_generation);
  EXPECT_EQ(c->tokens(), std::vector<int32_t>(all.begin(), end + 1));
}

TEST_F(InProcessWorkerTest, LogprobsAndAlternativesAsRequested) {
  InProcessWorker worker(world_->engine.get(), Options());
  WorkerRequest r = Request("The three primary colors are", 6);
  r.logprobs = true;
  auto only = RunToEnd(&worker, r);
  ASSERT_EQ(only->logprobs().size(), 6u);
  EXPECT_TRUE(only->top_logprobs().empty());
  r.top_logprobs = 3;
  auto top = RunToEnd(&worker, r);
  ASSERT_EQ(top->top_logprobs().size(), 6u);
  EXPECT_EQ(top->logprobs(), only->logprobs());
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_EQ(top->top_logprobs()[i].size(), 3u);
    // Greedy: the token is the best alternative, with the same log-probability.
    EXPECT_EQ(top->top_logprobs()[i][0].first, top->tokens()[i]);
    EXPECT_EQ(top->top_logprobs()[i][0].second, top->logprobs()[i]);
    EXPECT_LT(top->logprobs()[i], 0.0f);
  }
  r.logprobs = false;
  r.top_logprobs = 0;
  auto none = RunToEnd(&worker, r);
  EXPECT_TRUE(none->logprobs().empty());
  EXPECT_EQ(none->tokens(), top->tokens());
}

TEST_F(InProcessWorkerTest, CancelEndsWithCancelled) {
  InProcessWorker worker(world_->engine.get(), Options());
  testing::EventCollector c;
  WorkerRequest r = Request("Water boils at a temperature of", 400);
  absl::StatusOr<uint64_t> h = worker.Start(r, c.Callback());
  ASSERT_TRUE(h.ok());
  worker.Cancel(*h);
  c.Wait();
  EXPECT_EQ(c.final_event().error.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(c.tokens().size(), 400u);
  EXPECT_EQ(c.finished_events(), 1);
  worker.Cancel(*h);        // finished: no-op
  worker.Cancel(*h + 100);  // unknown: no-op
}

TEST_F(InProcessWorkerTest, BadRequestsFailAtStart) {
  InProcessWorker worker(world_->engine.get(), Options());
  testing::EventCollector c;
  WorkerRequest r = Request("Hello", 4);
  WorkerRequest empty = r;
  empty.context.clear();
  EXPECT_EQ(worker.Start(empty, c.Callback()).status().code(),
            absl::StatusCode::kInvalidArgument);
  WorkerRequest zero = r;
  zero.max_new_tokens = 0;
  EXPECT_EQ(worker.Start(zero, c.Callback()).status().code(),
            absl::StatusCode::kInvalidArgument);
  WorkerRequest all_generated = r;
  all_generated.generated_before = static_cast<int>(r.context.size());
  EXPECT_EQ(worker.Start(all_generated, c.Callback()).status().code(),
            absl::StatusCode::kInvalidArgument);
  WorkerRequest too_long = r;
  too_long.max_new_tokens = world_->engine->max_context();
  EXPECT_EQ(worker.Start(too_long, c.Callback()).status().code(),
            absl::StatusCode::kInvalidArgument);
  WorkerRequest bad_token = r;
  bad_token.context.push_back(1 << 30);
  EXPECT_EQ(worker.Start(bad_token, c.Callback()).status().code(),
            absl::StatusCode::kInvalidArgument);
  WorkerRequest unknown = r;
  unknown.adapter_id = "nope";
  EXPECT_EQ(worker.Start(unknown, c.Callback()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.events(), 0);
}

// An on-demand loader as loomd's AdapterManager behaves: registers a known directory on
// another thread, or fails NotFound.
TEST_F(InProcessWorkerTest, OnDemandAdapterLoadsThenMatchesEngine) {
  std::vector<std::thread> loaders;
  InProcessWorkerOptions o = Options();
  o.ensure_adapter = [&loaders](const std::string& id,
                                std::function<void(absl::Status)> done) {
    if (world_->store->Info(id).ok()) return done(absl::OkStatus());
    loaders.emplace_back([id, done = std::move(done)] {
      if (id != "a1") return done(absl::NotFoundError("adapter '" + id + "' not found"));
      done(world_->store->Register(id, world_->adapter_dir + "/a1"));
    });
  };
  InProcessWorker worker(world_->engine.get(), o);
  WorkerRequest r = Request("The capital of France is", 10);
  r.adapter_id = "a1";
  auto c = RunToEnd(&worker, r);  // loads on the loader thread, then submits
  ASSERT_TRUE(c->final_event().error.ok()) << c->final_event().error;
  absl::StatusOr<std::vector<int32_t>> reference = EngineTokens(world_->engine.get(), r);
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ(c->tokens(), *reference);
  WorkerRequest base = r;
  base.adapter_id.clear();
  EXPECT_NE(RunToEnd(&worker, base)->tokens(), c->tokens());  // the adapter is applied
  absl::StatusOr<WorkerLoad> load = worker.Load();
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->resident_adapters, std::vector<std::string>{"a1"});
  // Unknown even on demand: the failure is the finished event's error.
  r.adapter_id = "missing";
  auto missing = RunToEnd(&worker, r);
  EXPECT_EQ(missing->final_event().error.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(missing->tokens().empty());
  for (std::thread& t : loaders) t.join();
  ASSERT_TRUE(world_->store->Unload("a1").ok());
}

TEST_F(InProcessWorkerTest, LoadReportsEngineStateAndCloseDrains) {
  InProcessWorker worker(world_->engine.get(), Options());
  // The engine is shared with the earlier tests: its stats may still show their last
  // (finished or cancelled) request for a step. Wait, bounded, until it reads idle.
  absl::StatusOr<WorkerLoad> before = worker.Load();
  for (int i = 0; i < 200 && before.ok() && (before->running > 0 || before->queued > 0 ||
                                             before->kv_pages_free != before->kv_pages_total);
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    before = worker.Load();
  }
  ASSERT_TRUE(before.ok());
  const EngineStats st = world_->engine->GetStats();
  EXPECT_EQ(before->kv_pages_total, st.kv_pages_total);
  EXPECT_EQ(before->kv_pages_free, st.kv_pages_total);  // idle: nothing held
  EXPECT_EQ(before->running, 0);
  EXPECT_EQ(before->queued, 0);
  EXPECT_EQ(before->max_batch_size, world_->engine_options.max_running);
  RunToEnd(&worker, Request("Hello there", 3));
  // The step that emits the last token is counted after its callback ran: wait (bounded)
  // for the engine's stats to catch up rather than race them.
  absl::StatusOr<WorkerLoad> after = worker.Load();
  for (int i = 0; i < 200 && after.ok() && after->steps < before->steps + 3; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    after = worker.Load();
  }
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->steps, before->steps + 3);  // prefill + decode steps
  EXPECT_FALSE(after->draining);
  // Close drains: nothing new starts, what runs finishes.
  testing::EventCollector running;
  ASSERT_TRUE(worker.Start(Request("Once upon a time", 20), running.Callback()).ok());
  worker.Close();
  absl::StatusOr<WorkerLoad> closed = worker.Load();
  ASSERT_TRUE(closed.ok());
  EXPECT_TRUE(closed->draining);
  testing::EventCollector c;
  EXPECT_EQ(worker.Start(Request("Hi", 2), c.Callback()).status().code(),
            absl::StatusCode::kUnavailable);
  running.Wait();
  EXPECT_TRUE(running.final_event().error.ok());
  EXPECT_EQ(running.tokens().size(), 20u);
}

}  // namespace
}  // namespace loom
