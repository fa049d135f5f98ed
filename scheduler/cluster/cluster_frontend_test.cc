// ClusterFrontend over FakeWorkers. The reference for every stream is computed here
// independently of the frontend: FakeWorker::NextToken iterated over the prompt (what a
// single uninterrupted placement produces), decoded with the tokenizer and cut at the
// first stop string, so a failover or migration that lost, repeated or re-ordered a
// token, or split the text state, shows up as a mismatch.
#include "scheduler/cluster/cluster_frontend.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "models/tokenizer/test_vocab.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/worker/fake_worker.h"

namespace loom {
namespace {

constexpr int32_t kEos = 1;  // "</s>" in the test vocabulary

std::unique_ptr<Tokenizer> TestTokenizer() {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t =
      Tokenizer::Create(testing::ByteLevelVocab({"<s>", "</s>"}, {}));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

std::vector<int32_t> Prompt(const std::string& text) {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(2 + c);
  return ids;
}

struct Reference {
  std::vector<int32_t> tokens;  // what the client must receive
  std::string text;
};

// One uninterrupted greedy run of the fake model, with the engine's stop rules.
Reference ReferenceRun(const Tokenizer& tok, const std::string& adapter,
                       std::vector<int32_t> context, int max_tokens, int32_t eos,
                       const std::string& stop = "") {
  Reference ref;
  for (int i = 0; i < max_tokens; ++i) {
    const int32_t t = FakeWorker::NextToken(adapter, context, eos);
    context.push_back(t);
    ref.tokens.push_back(t);
    if (t == eos) break;
  }
  std::vector<int32_t> text_ids = ref.tokens;
  if (!text_ids.empty() && text_ids.back() == eos && eos >= 0) text_ids.pop_back();
  ref.text = *tok.Decode(text_ids);
  if (!stop.empty()) {
    const size_t at = ref.text.find(stop);
    if (at != std::string::npos) {
      ref.text.resize(at);
      // Tokens stop at the one completing the stop string (one byte per token here).
      ref.tokens.resize(at + stop.size());
    }
  }
  return ref;
}

// Collects one request's events.
struct Sink {
  absl::Mutex mu;
  std::string text;
  std::vector<int32_t> tokens;
  bool finished = false;
  StreamEvent final_event;

  StreamCallback Callback() {
    return [this](const StreamEvent& e) {
      absl::MutexLock l(&mu);
      EXPECT_FALSE(finished) << "event after the final one";
      text += e.text;
      tokens.insert(tokens.end(), e.token_ids.begin(), e.token_ids.end());
      if (e.finished) {
        finished = true;
        final_event = e;
      }
    };
  }
  int token_count() {
    absl::MutexLock l(&mu);
    return static_cast<int>(tokens.size());
  }
  bool done() {
    absl::MutexLock l(&mu);
    return finished;
  }
};

// Polls `pred` until true; fails the test after a generous bound (not a timing claim).
template <typename Pred>
bool WaitFor(Pred pred) {
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  while (!pred()) {
    if (absl::Now() > limit) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

ClusterOptions Options(const std::string& policy, int max_batch = 32) {
  ClusterOptions o;
  o.policy = policy;
  o.placement.max_batch_size = max_batch;
  o.tick = absl::Milliseconds(5);
  o.consolidation_interval = absl::ZeroDuration();
  o.idle_grace = absl::ZeroDuration();
  return o;
}

FrontendRequest Request(const std::string& prompt, const std::string& adapter, int max_tokens) {
  FrontendRequest r;
  r.prompt = Prompt(prompt);
  r.adapter_id = adapter;
  r.max_tokens = max_tokens;
  return r;
}

FakeWorker* AddFake(ClusterFrontend& f, FakeWorker::Options o) {
  auto w = std::make_unique<FakeWorker>(std::move(o));
  FakeWorker* raw = w.get();
  EXPECT_TRUE(f.AddWorker(std::move(w)).ok());
  return raw;
}

bool WorkerUp(ClusterFrontend& f, const std::string& name) {
  for (const ClusterWorkerStatus& w : f.GetStatus().workers) {
    if (w.name == name) return w.up;
  }
  return false;
}

class ClusterFrontendTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> tok_ = TestTokenizer();
};

TEST_F(ClusterFrontendTest, UninterruptedStreamsMatchReference) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica"));
  FakeWorker::Options wo;
  wo.name = "a";
  wo.eos_id = kEos;
  AddFake(*f, wo);
  std::vector<std::unique_ptr<Sink>> sinks;
  for (int i = 0; i < 8; ++i) {
    sinks.push_back(std::make_unique<Sink>());
    ASSERT_TRUE(f->Submit(Request("hi " + std::to_string(i), "ad" + std::to_string(i % 3), 60),
                          sinks.back()->Callback())
                    .ok());
  }
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(WaitFor([&] { return sinks[i]->done(); }));
    const Reference ref = ReferenceRun(*tok_, "ad" + std::to_string(i % 3),
                                       Prompt("hi " + std::to_string(i)), 60, kEos);
    EXPECT_EQ(sinks[i]->tokens, ref.tokens);
    EXPECT_EQ(sinks[i]->text, ref.text);
    EXPECT_TRUE(sinks[i]->final_event.error.ok());
    EXPECT_EQ(sinks[i]->final_event.completion_tokens, static_cast<int>(ref.tokens.size()));
    EXPECT_EQ(sinks[i]->final_event.finish_reason,
              ref.tokens.back() == kEos ? FinishReason::kStop : FinishReason::kLength);
  }
}

// A worker dies mid-stream: its requests finish on the other worker with exactly the
// unsplit token sequence and text.
TEST_F(ClusterFrontendTest, FailoverMidStreamYieldsUnsplitStream) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("least_loaded"));
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 7;
  FakeWorker* a = AddFake(*f, ao);
  constexpr int kN = 5;
  std::vector<std::unique_ptr<Sink>> sinks;
  for (int i = 0; i < kN; ++i) {
    sinks.push_back(std::make_unique<Sink>());
    ASSERT_TRUE(f->Submit(Request("p" + std::to_string(i), "x", 40), sinks[i]->Callback()).ok());
  }
  for (auto& s : sinks) ASSERT_TRUE(WaitFor([&] { return s->token_count() == 7; }));
  FakeWorker::Options bo;
  bo.name = "b";
  FakeWorker* b = AddFake(*f, bo);
  ASSERT_TRUE(WaitFor([&] { return WorkerUp(*f, "b"); }));
  a->Kill();
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(WaitFor([&] { return sinks[i]->done(); }));
    const Reference ref = ReferenceRun(*tok_, "x", Prompt("p" + std::to_string(i)), 40, -1);
    EXPECT_EQ(sinks[i]->tokens, ref.tokens) << i;
    EXPECT_EQ(sinks[i]->text, ref.text) << i;
    EXPECT_TRUE(sinks[i]->final_event.error.ok()) << sinks[i]->final_event.error;
    EXPECT_EQ(sinks[i]->final_event.completion_tokens, 40);
  }
  // The re-adds carried prompt + the 7 tokens so far and asked for the rest.
  const std::vector<WorkerRequest> moved = b->started();
  ASSERT_EQ(moved.size(), static_cast<size_t>(kN));
  for (const WorkerRequest& w : moved) {
    EXPECT_EQ(w.generated_before, 7);
    EXPECT_EQ(w.max_new_tokens, 33);
  }
  const ClusterStatus st = f->GetStatus();
  EXPECT_EQ(st.failovers, static_cast<uint64_t>(kN));
  EXPECT_FALSE(st.workers[0].up);
}

// ABORTED (the worker dropped the requests for its own reasons) re-places them too.
TEST_F(ClusterFrontendTest, AbortedRequestsAreReplaced) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica"));
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 3;
  FakeWorker* a = AddFake(*f, ao);
  Sink sink;
  ASSERT_TRUE(f->Submit(Request("abc", "", 20), sink.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] { return sink.token_count() == 3; }));
  a->AbortAll();
  ASSERT_TRUE(WaitFor([&] { return a->started().size() == 2; }));
  a->Unstall();
  ASSERT_TRUE(WaitFor([&] { return sink.done(); }));
  const Reference ref = ReferenceRun(*tok_, "", Prompt("abc"), 20, -1);
  EXPECT_EQ(sink.tokens, ref.tokens);
  EXPECT_EQ(sink.text, ref.text);
  EXPECT_EQ(f->GetStatus().failovers, 1u);
}

// Drain moves every request off the worker (tokens it leaks after the cancel are
// dropped) and nothing new is placed there.
TEST_F(ClusterFrontendTest, DrainMovesEverythingAndDropsLateTokens) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica"));
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 4;
  ao.leak_after_cancel = true;
  FakeWorker* a = AddFake(*f, ao);
  constexpr int kN = 6;
  std::vector<std::unique_ptr<Sink>> sinks;
  for (int i = 0; i < kN; ++i) {
    sinks.push_back(std::make_unique<Sink>());
    ASSERT_TRUE(
        f->Submit(Request("q" + std::to_string(i), "y" + std::to_string(i % 2), 30),
                  sinks[i]->Callback())
            .ok());
  }
  for (auto& s : sinks) ASSERT_TRUE(WaitFor([&] { return s->token_count() == 4; }));
  FakeWorker::Options bo;
  bo.name = "b";
  bo.stall_at = 10;
  FakeWorker* b = AddFake(*f, bo);
  ASSERT_TRUE(WaitFor([&] { return WorkerUp(*f, "b"); }));
  EXPECT_TRUE(f->Drain("nope").code() == absl::StatusCode::kNotFound);
  ASSERT_TRUE(f->Drain("a").ok());
  ASSERT_TRUE(WaitFor([&] { return a->active() == 0 && b->active() == kN; }));
  ClusterStatus st = f->GetStatus();
  ASSERT_TRUE(WaitFor([&] {
    st = f->GetStatus();
    return st.workers[0].assigned == 0;
  }));
  EXPECT_TRUE(st.workers[0].draining);
  EXPECT_EQ(st.migrations, static_cast<uint64_t>(kN));
  // A new request goes to b, not to the draining worker.
  Sink extra;
  ASSERT_TRUE(f->Submit(Request("new", "", 5), extra.Callback()).ok());
  b->Unstall();
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(WaitFor([&] { return sinks[i]->done(); }));
    const Reference ref =
        ReferenceRun(*tok_, "y" + std::to_string(i % 2), Prompt("q" + std::to_string(i)), 30, -1);
    EXPECT_EQ(sinks[i]->tokens, ref.tokens) << i;
    EXPECT_EQ(sinks[i]->text, ref.text) << i;
  }
  ASSERT_TRUE(WaitFor([&] { return extra.done(); }));
  EXPECT_EQ(a->started().size(), static_cast<size_t>(kN));
  EXPECT_EQ(b->started().size(), static_cast<size_t>(kN + 1));
}

// With every worker at the batch cap, requests wait in the router's queue (FCFS) and are
// placed as slots free up; the worker never holds more than the cap.
TEST_F(ClusterFrontendTest, QueuesWhenAllWorkersAreFull) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica", /*max_batch=*/2));
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 2;
  FakeWorker* a = AddFake(*f, ao);
  constexpr int kN = 5;
  std::vector<std::unique_ptr<Sink>> sinks;
  for (int i = 0; i < kN; ++i) {
    sinks.push_back(std::make_unique<Sink>());
    ASSERT_TRUE(f->Submit(Request("r" + std::to_string(i), "", 12), sinks[i]->Callback()).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return f->GetStatus().queued == 3; }));
  EXPECT_EQ(a->started().size(), 2u);
  EXPECT_TRUE(f->GetStatus().want_more);
  a->Unstall();
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(WaitFor([&] { return sinks[i]->done(); }));
    const Reference ref = ReferenceRun(*tok_, "", Prompt("r" + std::to_string(i)), 12, -1);
    EXPECT_EQ(sinks[i]->tokens, ref.tokens);
  }
  EXPECT_LE(a->max_active_running(), 2);
  // FCFS: started in submission order.
  const std::vector<WorkerRequest> started = a->started();
  ASSERT_EQ(started.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(started[i].context, Prompt("r" + std::to_string(i)));
}

// A stop string whose first two characters came from the first worker and whose last
// came from the second: the held-back text survives the move and is never released.
TEST_F(ClusterFrontendTest, StopStringSpanningAMigration) {
  const std::vector<int32_t> prompt = Prompt("stop test");
  const Reference full = ReferenceRun(*tok_, "z", prompt, 60, -1);
  // k = tokens produced on the first worker; the stop string is text[k-2, k+1) and must
  // not occur earlier.
  int k = -1;
  for (int c = 4; c + 1 < static_cast<int>(full.text.size()); ++c) {
    if (full.text.find(full.text.substr(c - 2, 3)) == static_cast<size_t>(c - 2)) {
      k = c;
      break;
    }
  }
  ASSERT_GT(k, 0);
  const std::string stop = full.text.substr(k - 2, 3);
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica"));
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = k;
  AddFake(*f, ao);
  Sink sink;
  FrontendRequest req = Request("stop test", "z", 60);
  req.stop_strings = {stop};
  ASSERT_TRUE(f->Submit(req, sink.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] { return sink.token_count() == k; }));
  {
    absl::MutexLock l(&sink.mu);
    EXPECT_EQ(sink.text, full.text.substr(0, k - 2));  // the possible match is held
  }
  FakeWorker::Options bo;
  bo.name = "b";
  AddFake(*f, bo);
  ASSERT_TRUE(WaitFor([&] { return WorkerUp(*f, "b"); }));
  ASSERT_TRUE(f->Drain("a").ok());
  ASSERT_TRUE(WaitFor([&] { return sink.done(); }));
  const Reference ref = ReferenceRun(*tok_, "z", prompt, 60, -1, stop);
  EXPECT_EQ(sink.text, ref.text);
  EXPECT_EQ(sink.tokens, ref.tokens);
  EXPECT_EQ(sink.final_event.finish_reason, FinishReason::kStop);
  EXPECT_EQ(sink.final_event.completion_tokens, k + 1);
}

TEST_F(ClusterFrontendTest, CancelAndErrors) {
  ClusterOptions o = Options("round_robin");
  auto f = *ClusterFrontend::Create(tok_.get(), o);
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 2;
  FakeWorker* a = AddFake(*f, ao);
  EXPECT_EQ(f->AddWorker(std::make_unique<FakeWorker>(ao)).code(),
            absl::StatusCode::kAlreadyExists);
  // The text layer's own refusals (the edge validated everything else).
  FrontendRequest empty;
  EXPECT_EQ(f->Submit(empty, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  FrontendRequest bad = Request("x", "", 5);
  bad.stop_strings = {""};
  EXPECT_EQ(f->Submit(bad, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  // An error that is the request's own (unknown adapter) goes to the client.
  Sink missing;
  ASSERT_TRUE(f->Submit(Request("x", "missing", 5), missing.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] { return missing.done(); }));
  EXPECT_EQ(missing.final_event.error.code(), absl::StatusCode::kNotFound);
  // Client cancel.
  Sink sink;
  absl::StatusOr<uint64_t> id = f->Submit(Request("x", "", 50), sink.Callback());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(WaitFor([&] { return sink.token_count() == 2; }));
  f->Cancel(*id);
  ASSERT_TRUE(WaitFor([&] { return sink.done(); }));
  EXPECT_EQ(sink.final_event.error.code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(WaitFor([&] { return a->active() == 0; }));
  EXPECT_EQ(f->GetStatus().active, 0);
}

// Idle workers are reported for an autoscaler once they hold nothing.
TEST_F(ClusterFrontendTest, ReportsIdleWorkers) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica"));
  FakeWorker::Options ao;
  ao.name = "a";
  AddFake(*f, ao);
  FakeWorker::Options bo;
  bo.name = "b";
  bo.stall_at = 1;
  AddFake(*f, bo);
  ASSERT_TRUE(WaitFor([&] { return WorkerUp(*f, "a") && WorkerUp(*f, "b"); }));
  ASSERT_TRUE(f->Drain("a").ok());
  Sink sink;
  ASSERT_TRUE(f->Submit(Request("x", "", 5), sink.Callback()).ok());
  ASSERT_TRUE(f->Drain("a", /*undrain=*/true).ok());
  ClusterStatus st;
  ASSERT_TRUE(WaitFor([&] {
    st = f->GetStatus();
    return st.workers[1].assigned == 1 && !st.workers[0].draining;
  }));
  EXPECT_EQ(st.idle_workers, std::vector<std::string>{"a"});
  EXPECT_TRUE(st.workers[0].idle);
  EXPECT_FALSE(st.workers[1].idle);
}

// Punica consolidation: the lightly loaded worker's request moves (cancel + re-add) onto
// the fuller worker, which continues it exactly; the emptied worker goes idle.
TEST_F(ClusterFrontendTest, ConsolidationEmptiesTheLighterWorker) {
  ClusterOptions o = Options("punica", /*max_batch=*/3);
  o.consolidation_interval = absl::Milliseconds(5);
  auto f = *ClusterFrontend::Create(tok_.get(), o);
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 3;
  FakeWorker* a = AddFake(*f, ao);
  FakeWorker::Options bo;
  bo.name = "b";
  bo.stall_at = 3;
  FakeWorker* b = AddFake(*f, bo);
  ASSERT_TRUE(WaitFor([&] { return WorkerUp(*f, "a") && WorkerUp(*f, "b"); }));
  // Punica packs: three on a (the cap), the fourth on b.
  std::vector<std::unique_ptr<Sink>> sinks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_unique<Sink>());
    absl::StatusOr<uint64_t> id =
        f->Submit(Request("c" + std::to_string(i), "", 20), sinks.back()->Callback());
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  ASSERT_TRUE(WaitFor([&] { return sinks[3]->token_count() == 3; }));
  EXPECT_EQ(a->active(), 3);
  EXPECT_EQ(b->active(), 1);
  EXPECT_EQ(f->GetStatus().migrations, 0u);  // a is full: nothing can move yet
  // One of a's requests ends: b's request now fits on a and moves there.
  f->Cancel(ids[0]);
  ASSERT_TRUE(WaitFor([&] { return a->active() == 3 && b->active() == 0; }));
  EXPECT_EQ(f->GetStatus().migrations, 1u);
  a->Unstall();
  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(WaitFor([&] { return sinks[i]->done(); }));
    const Reference ref = ReferenceRun(*tok_, "", Prompt("c" + std::to_string(i)), 20, -1);
    EXPECT_EQ(sinks[i]->tokens, ref.tokens) << i;
    EXPECT_EQ(sinks[i]->text, ref.text) << i;
  }
  EXPECT_EQ(b->started().size(), 1u);
  EXPECT_EQ(a->started().size(), 4u);
  EXPECT_EQ(a->started().back().generated_before, 3);
}

// A worker shutting down on its own (WorkerLoad::draining) gets nothing new, and its
// running requests are left to finish there (not moved).
TEST_F(ClusterFrontendTest, SelfDrainingWorkerKeepsItsRequestsAndGetsNoNewOnes) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica"));
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 2;
  FakeWorker* a = AddFake(*f, ao);
  Sink first;
  ASSERT_TRUE(f->Submit(Request("d0", "", 10), first.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] { return first.token_count() == 2; }));
  FakeWorker::Options bo;
  bo.name = "b";
  FakeWorker* b = AddFake(*f, bo);
  a->SetDraining(true);
  ASSERT_TRUE(WaitFor([&] {
    const ClusterStatus st = f->GetStatus();
    return st.workers.size() == 2 && st.workers[0].draining && st.workers[1].up;
  }));
  Sink second;
  ASSERT_TRUE(f->Submit(Request("d1", "", 10), second.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] { return second.done(); }));
  EXPECT_EQ(b->started().size(), 1u);
  EXPECT_EQ(a->active(), 1);  // not moved
  a->Unstall();
  ASSERT_TRUE(WaitFor([&] { return first.done(); }));
  EXPECT_EQ(first.tokens, ReferenceRun(*tok_, "", Prompt("d0"), 10, -1).tokens);
  EXPECT_EQ(second.tokens, ReferenceRun(*tok_, "", Prompt("d1"), 10, -1).tokens);
  EXPECT_EQ(f->GetStatus().migrations, 0u);
  EXPECT_EQ(f->GetStatus().failovers, 0u);
}

// A deadline ends the request (placed or still queued) with DEADLINE_EXCEEDED and
// cancels its placement.
TEST_F(ClusterFrontendTest, DeadlineEndsPlacedAndQueuedRequests) {
  auto f = *ClusterFrontend::Create(tok_.get(), Options("punica", /*max_batch=*/1));
  FakeWorker::Options ao;
  ao.name = "a";
  ao.stall_at = 1;
  FakeWorker* a = AddFake(*f, ao);
  Sink placed, queued;
  FrontendRequest r1 = Request("x", "", 10);
  r1.deadline = absl::Now() + absl::Milliseconds(200);
  FrontendRequest r2 = Request("y", "", 10);
  r2.deadline = absl::Now() + absl::Milliseconds(200);
  ASSERT_TRUE(f->Submit(r1, placed.Callback()).ok());
  ASSERT_TRUE(f->Submit(r2, queued.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] { return placed.done() && queued.done(); }));
  EXPECT_EQ(placed.final_event.error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(queued.final_event.error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(placed.tokens.size(), 1u);
  EXPECT_TRUE(queued.tokens.empty());
  ASSERT_TRUE(WaitFor([&] { return a->active() == 0; }));
  EXPECT_EQ(a->started().size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return f->GetStatus().active == 0; }));
  EXPECT_EQ(f->GetStatus().queued, 0u);
}

}  // namespace
}  // namespace loom
