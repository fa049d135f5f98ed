// End-to-end `loomd --role=worker`: the real binary, driven through RemoteWorker, gives
// the same tokens as the single-process daemon for the same prompt token ids (raw text
// with ignore_eos, with an adapter loaded on demand from --adapter_roots, and a chat
// prompt that ends its turn); it serves the Worker service, Admin, health and /metrics
// but not loom.v1.Inference; SIGTERM drains (the running
// stream finishes, heartbeats say draining, new streams are refused); SIGTERM with no
// grace and SIGKILL mid-stream both end the open stream with UNAVAILABLE (the router
// re-places it), and a killed worker's Load() goes UNAVAILABLE.
#include <signal.h>

#include <memory>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "scheduler/cluster/remote_worker.h"
#include "scheduler/engine/engine_test_support.h"
#include "tests/e2e/loomd_process.h"

namespace loom::e2e {
namespace {

using loom::testing::EventCollector;
using loom::testing::RunToEnd;

std::unique_ptr<RemoteWorker> Connect(const LoomdProcess& worker) {
  RemoteWorkerOptions o;
  o.target = worker.target();
  auto r = RemoteWorker::Create(o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return nullptr;
  absl::Status ready = (*r)->WaitUntilReady(absl::Seconds(60));
  EXPECT_TRUE(ready.ok()) << ready;
  return *std::move(r);
}

// Polls (no timing assertion) until `pred` holds or ~30 s pass.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 3000; ++i) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return pred();
}

TEST(WorkerE2eTest, WorkerMatchesSingleProcessDaemon) {
  // One adapter under a root, loaded on demand by id by both daemons.
  const std::string root = TempDir("adapters");
  ASSERT_TRUE(MakeTestAdapter(root + "/t0", 8, 100).ok());
  auto single = LoomdProcess::Start({"--adapter_roots=" + root});
  ASSERT_TRUE(single.ok()) << single.status();
  auto worker = LoomdProcess::Start({"--role=worker", "--adapter_roots=" + root});
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::unique_ptr<LoomClient> client = (*single)->Client();
  std::unique_ptr<RemoteWorker> remote = Connect(**worker);
  ASSERT_NE(remote, nullptr);

  // Raw text, end-of-generation ignored: 24 tokens each way.
  absl::StatusOr<std::vector<int32_t>> ids = client->TokenizeText("The capital of France is");
  ASSERT_TRUE(ids.ok()) << ids.status();
  v1::GenerateRequest g;
  g.mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
  g.set_max_tokens(24);
  g.set_ignore_eos(true);
  absl::StatusOr<GenerateResult> expected = client->GenerateAll(g);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->token_ids.size(), 24u);
  WorkerRequest r;
  r.context = *ids;
  r.max_new_tokens = 24;
  r.stop_at_end_of_generation = false;
  auto got = RunToEnd(remote.get(), r);
  ASSERT_TRUE(got->final_event().error.ok()) << got->final_event().error;
  EXPECT_EQ(got->tokens(), expected->token_ids);

  // The same with the adapter, loaded on demand on first use; an id under no root fails.
  g.set_adapter_id("t0");
  absl::StatusOr<GenerateResult> adapted = client->GenerateAll(g);
  ASSERT_TRUE(adapted.ok()) << adapted.status();
  EXPECT_NE(adapted->token_ids, expected->token_ids);  // the adapter changes the output
  r.adapter_id = "t0";
  auto got_adapted = RunToEnd(remote.get(), r);
  ASSERT_TRUE(got_adapted->final_event().error.ok()) << got_adapted->final_event().error;
  EXPECT_EQ(got_adapted->tokens(), adapted->token_ids);
  r.adapter_id = "t9";
  EXPECT_EQ(RunToEnd(remote.get(), r)->final_event().error.code(), absl::StatusCode::kNotFound);
  g.clear_adapter_id();

  // A chat prompt that ends its turn: same tokens, the worker flags end_of_generation.
  v1::TokenizeRequest t;
  v1::ChatMessage* m = t.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("What is 2 + 2?");
  absl::StatusOr<v1::TokenizeResponse> chat = client->Tokenize(t);
  ASSERT_TRUE(chat.ok()) << chat.status();
  v1::GenerateRequest gc;
  *gc.mutable_token_ids()->mutable_ids() = chat->token_ids();
  gc.set_max_tokens(160);
  absl::StatusOr<GenerateResult> chat_expected = client->GenerateAll(gc);
  ASSERT_TRUE(chat_expected.ok()) << chat_expected.status();
  WorkerRequest rc;
  rc.context.assign(chat->token_ids().begin(), chat->token_ids().end());
  rc.max_new_tokens = 160;
  auto chat_got = RunToEnd(remote.get(), rc);
  ASSERT_TRUE(chat_got->final_event().error.ok()) << chat_got->final_event().error;
  EXPECT_EQ(chat_got->tokens(), chat_expected->token_ids);
  EXPECT_EQ(chat_got->final_event().end_of_generation,
            chat_expected->finish_reason == v1::FINISH_REASON_STOP);
  EXPECT_TRUE(chat_got->final_event().end_of_generation);

  // Worker role: no loom.v1.Inference; Admin, health and /metrics as single.
  absl::StatusOr<GenerateResult> inference = (*worker)->Client()->GenerateAll(g);
  EXPECT_EQ(inference.status().code(), absl::StatusCode::kUnimplemented) << inference.status();
  absl::StatusOr<v1::GetStatusResponse> status = (*worker)->AdminClient()->GetStatus();
  EXPECT_TRUE(status.ok()) << status.status();
  absl::StatusOr<HttpResponse> metrics = HttpGet((*worker)->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status, 200);
  absl::StatusOr<WorkerLoad> load = remote->Load();
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_GT(load->kv_pages_total, 0);
  EXPECT_GT(load->steps, 0u);

  remote.reset();
  EXPECT_EQ((*worker)->Stop(), 0);
  EXPECT_EQ((*single)->Stop(), 0);
}

TEST(WorkerE2eTest, SigtermDrainsAndLostWorkersEndStreamsUnavailable) {
  WorkerRequest r;
  r.context = {504, 3458, 282, 4649, 314};  // any in-vocabulary ids
  r.max_new_tokens = 1000;
  r.stop_at_end_of_generation = false;

  // SIGTERM with a grace period: heartbeats report draining, new streams fail
  // UNAVAILABLE, the running one finishes normally; exit 0.
  {
    auto worker = LoomdProcess::Start({"--role=worker", "--shutdown_grace=120s"});
    ASSERT_TRUE(worker.ok()) << worker.status();
    std::unique_ptr<RemoteWorker> remote = Connect(**worker);
    ASSERT_NE(remote, nullptr);
    WorkerRequest shorter = r;
    shorter.max_new_tokens = 200;
    EventCollector c;
    ASSERT_TRUE(remote->Start(shorter, c.Callback()).ok());
    ASSERT_TRUE(Eventually([&] { return !c.tokens().empty(); }));
    (*worker)->Signal(SIGTERM);
    EXPECT_TRUE(Eventually([&] {
      absl::StatusOr<WorkerLoad> l = remote->Load();
      return c.finished_events() > 0 || (l.ok() && l->draining);
    }));
    if (c.finished_events() == 0) {  // still draining: new work is refused
      WorkerRequest hi = r;
      hi.max_new_tokens = 2;
      EXPECT_EQ(RunToEnd(remote.get(), hi)->final_event().error.code(),
                absl::StatusCode::kUnavailable);
    }
    c.Wait();
    EXPECT_TRUE(c.final_event().error.ok()) << c.final_event().error;
    EXPECT_EQ(c.tokens().size(), 200u);
    EXPECT_EQ((*worker)->Wait(absl::Seconds(60)), 0) << (*worker)->Log();
  }
  // SIGTERM with no grace: the running request is cut with UNAVAILABLE; exit 0.
  {
    auto worker = LoomdProcess::Start({"--role=worker", "--shutdown_grace=0s"});
    ASSERT_TRUE(worker.ok()) << worker.status();
    std::unique_ptr<RemoteWorker> remote = Connect(**worker);
    ASSERT_NE(remote, nullptr);
    EventCollector c;
    ASSERT_TRUE(remote->Start(r, c.Callback()).ok());
    ASSERT_TRUE(Eventually([&] { return !c.tokens().empty(); }));
    (*worker)->Signal(SIGTERM);
    c.Wait();
    EXPECT_EQ(c.final_event().error.code(), absl::StatusCode::kUnavailable)
        << c.final_event().error;
    EXPECT_LT(c.tokens().size(), 1000u);
    EXPECT_EQ((*worker)->Wait(absl::Seconds(60)), 0) << (*worker)->Log();
  }
  // SIGKILL: the dropped connection ends the stream with UNAVAILABLE; heartbeats then
  // fail and Load() goes UNAVAILABLE.
  {
    auto worker = LoomdProcess::Start({"--role=worker"});
    ASSERT_TRUE(worker.ok()) << worker.status();
    std::unique_ptr<RemoteWorker> remote = Connect(**worker);
    ASSERT_NE(remote, nullptr);
    EventCollector c;
    ASSERT_TRUE(remote->Start(r, c.Callback()).ok());
    ASSERT_TRUE(Eventually([&] { return !c.tokens().empty(); }));
    (*worker)->Signal(SIGKILL);
    c.Wait();
    EXPECT_EQ(c.final_event().error.code(), absl::StatusCode::kUnavailable)
        << c.final_event().error;
    EXPECT_EQ(c.finished_events(), 1);
    EXPECT_TRUE(Eventually([&] { return !remote->Load().ok(); }));
    EXPECT_EQ(remote->Load().status().code(), absl::StatusCode::kUnavailable);
    (*worker)->Wait(absl::Seconds(10));
  }
}

}  // namespace
}  // namespace loom::e2e
