// The engine on the real SmolLM2 model with real (synthetic, PEFT-format) adapters, as
// the Worker it is: concurrent streams equal the same requests run alone; preemption
// under KV pressure loses nothing; re-adding with context = prompt + the first k
// generated tokens continues exactly the unsplit run (greedy, and seeded sampling via
// generated_before); end of generation, logprobs, cancellation, deadlines, on-demand
// adapters, unloading, load reports and refusals.
#include "scheduler/engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "scheduler/engine/engine_test_support.h"

namespace loom {
namespace {

using testing::EventCollector;
using testing::RunToEnd;
using testing::WorkerWorld;

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto w = WorkerWorld::Create(std::string(std::getenv("TEST_TMPDIR")) + "/adapters");
    ASSERT_TRUE(w.ok()) << w.status();
    world_ = w->release();
    ASSERT_TRUE(world_->store->Register("a0", world_->adapter_dir + "/a0").ok());
    ASSERT_TRUE(world_->store->Register("a1", world_->adapter_dir + "/a1").ok());
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
  }

  static Engine* engine() { return world_->engine.get(); }

  static WorkerRequest Request(const std::string& text, const std::string& adapter,
                               int max_new_tokens) {
    WorkerRequest r;
    r.context = testing::Encode(*world_, text);
    r.adapter_id = adapter;
    r.max_new_tokens = max_new_tokens;
    r.stop_at_end_of_generation = false;
    return r;
  }

  // Re-adds `r` after its first k tokens of `whole`, as a frontend does on migration.
  static WorkerRequest Resumed(WorkerRequest r, const std::vector<int32_t>& whole, int k) {
    r.context.insert(r.context.end(), whole.begin(), whole.begin() + k);
    r.max_new_tokens -= k;
    r.generated_before = k;
    return r;
  }

  // Waits (bounded) until `engine` holds no KV page: pages are returned at the step
  // that handles a finish or cancel, after its callbacks ran.
  static int32_t PagesUsedWhenSettled(Engine* e) {
    for (int i = 0; i < 200 && e->GetStats().kv_pages_used != 0; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return e->GetStats().kv_pages_used;
  }

  static inline WorkerWorld* world_ = nullptr;
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
  const std::string adapters[] = {"", "a0", "a1"};
  std::vector<WorkerRequest> reqs;
  for (int i = 0; i < 9; ++i) reqs.push_back(Request(kPrompts[i % 6], adapters[i % 3], 12));
  std::vector<std::vector<int32_t>> alone;
  for (const WorkerRequest& r : reqs) {
    auto c = RunToEnd(engine(), r);
    ASSERT_TRUE(c->final_event().error.ok()) << c->final_event().error;
    ASSERT_EQ(c->tokens().size(), 12u);
    alone.push_back(c->tokens());
  }
  // The adapters really change the output.
  EXPECT_NE(alone[0], alone[1]);
  EXPECT_NE(alone[1], alone[2]);
  std::vector<std::unique_ptr<EventCollector>> cs;
  for (const WorkerRequest& r : reqs) {
    cs.push_back(std::make_unique<EventCollector>());
    ASSERT_TRUE(engine()->Start(r, cs.back()->Callback()).ok());
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    cs[i]->Wait();
    EXPECT_EQ(cs[i]->tokens(), alone[i]) << "request " << i;
    EXPECT_EQ(cs[i]->finished_events(), 1);
    EXPECT_FALSE(cs[i]->event_after_final());
    EXPECT_FALSE(cs[i]->final_event().end_of_generation);  // max_new_tokens ended it
    EXPECT_GT(cs[i]->events(), 1);                          // streamed, not one lump
  }
}

TEST_F(EngineTest, PreemptionUnderKvPressureLosesNoToken) {
  std::vector<WorkerRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Request(kPrompts[i], i % 2 ? "a0" : "", 40));
  std::vector<std::vector<int32_t>> alone;
  for (const WorkerRequest& r : reqs) alone.push_back(RunToEnd(engine(), r)->tokens());
  EngineOptions o;
  o.kv.n_pages = 10;  // 160 token slots for 6 x ~50 tokens
  absl::StatusOr<std::unique_ptr<Engine>> tight = world_->NewEngine(o);
  ASSERT_TRUE(tight.ok()) << tight.status();
  std::vector<std::unique_ptr<EventCollector>> cs;
  for (const WorkerRequest& r : reqs) {
    cs.push_back(std::make_unique<EventCollector>());
    ASSERT_TRUE((*tight)->Start(r, cs.back()->Callback()).ok());
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    cs[i]->Wait();
    ASSERT_TRUE(cs[i]->final_event().error.ok()) << cs[i]->final_event().error;
    EXPECT_EQ(cs[i]->tokens(), alone[i]) << "request " << i;
  }
  EXPECT_GT((*tight)->GetStats().preemptions, 0);
  EXPECT_EQ(PagesUsedWhenSettled(tight->get()), 0);
}

TEST_F(EngineTest, ReAddAfterKTokensContinuesTheUnsplitRun) {
  const WorkerRequest r = Request(kPrompts[1], "a1", 24);
  const std::vector<int32_t> all = RunToEnd(engine(), r)->tokens();
  ASSERT_EQ(all.size(), 24u);
  for (int k : {1, 9, 23}) {
    auto rest = RunToEnd(engine(), Resumed(r, all, k));
    ASSERT_TRUE(rest->final_event().error.ok()) << rest->final_event().error;
    EXPECT_EQ(rest->tokens(), std::vector<int32_t>(all.begin() + k, all.end())) << "k=" << k;
  }
}

TEST_F(EngineTest, SeededRequestResumedWithGeneratedBeforeMatchesUnsplit) {
  WorkerRequest r = Request(kPrompts[5], "", 24);
  r.sampling.temperature = 1.5f;
  r.sampling.top_p = 0.95f;
  r.sampling.has_seed = true;
  r.sampling.seed = 31337;
  const std::vector<int32_t> all = RunToEnd(engine(), r)->tokens();
  ASSERT_EQ(all.size(), 24u);
  // Really sampled: greedy gives something else.
  WorkerRequest greedy = r;
  greedy.sampling = SamplingOptions();
  EXPECT_NE(RunToEnd(engine(), greedy)->tokens(), all);
  for (int k : {1, 10}) {
    auto rest = RunToEnd(engine(), Resumed(r, all, k));
    ASSERT_TRUE(rest->final_event().error.ok());
    EXPECT_EQ(rest->tokens(), std::vector<int32_t>(all.begin() + k, all.end())) << "k=" << k;
  }
  // Without generated_before the resumed sampler restarts its sequence and diverges.
  WorkerRequest restart = Resumed(r, all, 10);
  restart.generated_before = 0;
  EXPECT_NE(RunToEnd(engine(), restart)->tokens(),
            std::vector<int32_t>(all.begin() + 10, all.end()));
}

TEST_F(EngineTest, EndOfGenerationTokenEndsAndIsFlagged) {
  ASSERT_TRUE(world_->chat.has_value());
  absl::StatusOr<std::vector<int32_t>> chat =
      world_->chat->Render({{"user", "What is 2 + 2?"}}, /*add_generation_prompt=*/true);
  ASSERT_TRUE(chat.ok());
  // Reference: the free-running greedy output, in which the turn ends at `end`.
  WorkerRequest r;
  r.context = *chat;
  r.max_new_tokens = 160;
  r.stop_at_end_of_generation = false;
  auto free_run = RunToEnd(engine(), r);
  ASSERT_TRUE(free_run->final_event().error.ok());
  EXPECT_FALSE(free_run->final_event().end_of_generation);
  const std::vector<int32_t> all = free_run->tokens();
  const std::vector<int32_t>& eog = world_->tokenizer->end_of_generation_ids();
  const auto end = std::find_first_of(all.begin(), all.end(), eog.begin(), eog.end());
  ASSERT_NE(end, all.end()) << "the model did not end its turn in 160 tokens";
  r.stop_at_end_of_generation = true;
  auto c = RunToEnd(engine(), r);
  ASSERT_TRUE(c->final_event().error.ok());
  EXPECT_TRUE(c->final_event().end_of_generation);
  EXPECT_EQ(c->tokens(), std::vector<int32_t>(all.begin(), end + 1));
}

TEST_F(EngineTest, LogprobsAndAlternativesAsRequested) {
  WorkerRequest r = Request(kPrompts[3], "", 6);
  r.logprobs = true;
  auto only = RunToEnd(engine(), r);
  ASSERT_EQ(only->logprobs().size(), 6u);
  EXPECT_TRUE(only->top_logprobs().empty());
  r.top_logprobs = 3;
  auto top = RunToEnd(engine(), r);
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
  auto none = RunToEnd(engine(), r);
  EXPECT_TRUE(none->logprobs().empty());
  EXPECT_EQ(none->tokens(), top->tokens());
}

TEST_F(EngineTest, CancelFreesPages) {
  EventCollector c;
  absl::Notification first;
  std::atomic<bool> notified{false};
  WorkerCallback cb = c.Callback();
  auto id = engine()->Start(Request(kPrompts[1], "", 500), [&](const WorkerEvent& e) {
    cb(e);
    if (!notified.exchange(true)) first.Notify();
  });
  ASSERT_TRUE(id.ok());
  first.WaitForNotification();
  EXPECT_GT(engine()->GetStats().kv_pages_used, 0);
  engine()->Cancel(*id);
  c.Wait();
  EXPECT_EQ(c.final_event().error.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(c.tokens().size(), 500u);
  EXPECT_EQ(c.finished_events(), 1);
  EXPECT_EQ(PagesUsedWhenSettled(engine()), 0);
  engine()->Cancel(*id);        // finished: no-op
  engine()->Cancel(*id + 100);  // unknown: no-op
}

TEST_F(EngineTest, DeadlineEndsRequest) {
  WorkerRequest r = Request(kPrompts[1], "", 500);
  r.deadline = absl::Now() + absl::Milliseconds(300);
  auto c = RunToEnd(engine(), r);
  EXPECT_EQ(c->final_event().error.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(EngineTest, UnloadDrainsRunningStreamThenRefuses) {
  ASSERT_TRUE(world_->store->Register("drained", world_->adapter_dir + "/a1").ok());
  EventCollector c;
  ASSERT_TRUE(engine()->Start(Request(kPrompts[0], "drained", 20), c.Callback()).ok());
  ASSERT_TRUE(world_->store->Unload("drained").ok());
  c.Wait();
  EXPECT_TRUE(c.final_event().error.ok()) << c.final_event().error;
  EXPECT_EQ(c.tokens().size(), 20u);
  EventCollector again;
  EXPECT_EQ(engine()->Start(Request(kPrompts[0], "drained", 5), again.Callback()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, RequestsBreakingItsInvariantsAreRefusedClearly) {
  EventCollector c;
  auto code = [&](const WorkerRequest& r) { return engine()->Start(r, c.Callback()).status(); };
  const WorkerRequest r = Request("Hello", "", 4);
  WorkerRequest empty = r;
  empty.context.clear();
  EXPECT_EQ(code(empty).code(), absl::StatusCode::kInvalidArgument);
  WorkerRequest zero = r;
  zero.max_new_tokens = 0;
  EXPECT_EQ(code(zero).code(), absl::StatusCode::kInvalidArgument);
  WorkerRequest all_generated = r;
  all_generated.generated_before = static_cast<int>(r.context.size());
  EXPECT_EQ(code(all_generated).code(), absl::StatusCode::kInvalidArgument);
  WorkerRequest too_long = r;
  too_long.max_new_tokens = engine()->max_context();
  absl::Status s = code(too_long);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(std::to_string(engine()->max_context())), std::string::npos) << s;
  WorkerRequest bad_token = r;
  bad_token.context.push_back(world_->model->config().vocab_size);
  EXPECT_EQ(code(bad_token).code(), absl::StatusCode::kInvalidArgument);
  WorkerRequest too_many_alternatives = r;
  too_many_alternatives.top_logprobs = kMaxTopLogprobs + 1;
  EXPECT_EQ(code(too_many_alternatives).code(), absl::StatusCode::kInvalidArgument);
  WorkerRequest bad_sampling = r;
  bad_sampling.sampling.top_p = 1.5f;
  s = code(bad_sampling);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("top_p"), std::string::npos) << s;
  WorkerRequest unknown = r;
  unknown.adapter_id = "nope";
  EXPECT_EQ(code(unknown).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.events(), 0);

  // Queue of 1: a burst of submissions overflows before the engine drains it.
  EngineOptions o;
  o.kv.n_pages = 64;
  o.max_queued = 1;
  absl::StatusOr<std::unique_ptr<Engine>> small = world_->NewEngine(o);
  ASSERT_TRUE(small.ok());
  int exhausted = 0;
  std::vector<std::unique_ptr<EventCollector>> cs;
  for (int i = 0; i < 20; ++i) {
    cs.push_back(std::make_unique<EventCollector>());
    auto id = (*small)->Start(Request(kPrompts[2], "", 2), cs.back()->Callback());
    if (!id.ok()) {
      EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted);
      ++exhausted;
      cs.pop_back();
    }
  }
  EXPECT_GT(exhausted, 0);
  for (auto& each : cs) each->Wait();
}

// An on-demand loader as loomd's AdapterManager behaves: registers a known directory on
// another thread, or fails NotFound.
TEST_F(EngineTest, OnDemandAdapterLoadsThenMatchesAPreloadedOne) {
  std::vector<std::thread> loaders;
  EngineOptions o = world_->engine_options;
  o.ensure_adapter = [&loaders](const std::string& id,
                                std::function<void(absl::Status)> done) {
    if (world_->store->Info(id).ok()) return done(absl::OkStatus());
    loaders.emplace_back([id, done = std::move(done)] {
      if (id != "late") return done(absl::NotFoundError("adapter '" + id + "' not found"));
      done(world_->store->Register(id, world_->adapter_dir + "/a1"));
    });
  };
  absl::StatusOr<std::unique_ptr<Engine>> e = world_->NewEngine(o);
  ASSERT_TRUE(e.ok());
  WorkerRequest r = Request(kPrompts[0], "late", 10);
  auto c = RunToEnd(e->get(), r);  // loads on the loader thread, then runs
  ASSERT_TRUE(c->final_event().error.ok()) << c->final_event().error;
  r.adapter_id = "a1";  // the same weights, registered before
  EXPECT_EQ(c->tokens(), RunToEnd(engine(), r)->tokens());
  r.adapter_id.clear();
  EXPECT_NE(RunToEnd(e->get(), r)->tokens(), c->tokens());  // the adapter is applied
  absl::StatusOr<WorkerLoad> load = (*e)->Load();
  ASSERT_TRUE(load.ok());
  EXPECT_NE(std::find(load->resident_adapters.begin(), load->resident_adapters.end(), "late"),
            load->resident_adapters.end());
  // Unknown even on demand: the failure is the finished event's error.
  r.adapter_id = "missing";
  auto missing = RunToEnd(e->get(), r);
  EXPECT_EQ(missing->final_event().error.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(missing->tokens().empty());
  for (std::thread& t : loaders) t.join();
  ASSERT_TRUE(world_->store->Unload("late").ok());
}

TEST_F(EngineTest, LoadReportsItsStateAndCloseDrains) {
  absl::StatusOr<std::unique_ptr<Engine>> e = world_->NewEngine(world_->engine_options);
  ASSERT_TRUE(e.ok());
  absl::StatusOr<WorkerLoad> before = (*e)->Load();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->kv_pages_total, 256);
  EXPECT_EQ(before->kv_pages_free, 256);  // idle: nothing held
  EXPECT_EQ(before->running, 0);
  EXPECT_EQ(before->queued, 0);
  EXPECT_EQ(before->max_batch_size, world_->engine_options.max_running);
  EXPECT_EQ(before->steps, 0u);
  RunToEnd(e->get(), Request("Hello there", "", 3));
  // The step that emits the last token is counted after its callback ran: wait (bounded)
  // for the stats to catch up rather than race them.
  absl::StatusOr<WorkerLoad> after = (*e)->Load();
  for (int i = 0; i < 200 && after.ok() && after->steps < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    after = (*e)->Load();
  }
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->steps, 3u);  // prefill + decode steps
  EXPECT_GT(after->step_seconds_ewma, 0.0);
  EXPECT_FALSE(after->draining);
  // Close drains: nothing new starts, what runs finishes.
  EventCollector running;
  ASSERT_TRUE((*e)->Start(Request("Once upon a time", "a0", 20), running.Callback()).ok());
  bool saw_adapter_running = false;
  for (int i = 0; i < 200 && !saw_adapter_running; ++i) {
    const EngineStats st = (*e)->GetStats();
    saw_adapter_running = st.running_adapters == std::vector<std::string>{"a0"};
    if (!saw_adapter_running) absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE(saw_adapter_running);
  (*e)->Close();
  absl::StatusOr<WorkerLoad> closed = (*e)->Load();
  ASSERT_TRUE(closed.ok());
  EXPECT_TRUE(closed->draining);
  EventCollector refused;
  EXPECT_EQ((*e)->Start(Request("Hi", "", 2), refused.Callback()).status().code(),
            absl::StatusCode::kUnavailable);
  running.Wait();
  EXPECT_TRUE(running.final_event().error.ok());
  EXPECT_EQ(running.tokens().size(), 20u);
}

}  // namespace
}  // namespace loom
