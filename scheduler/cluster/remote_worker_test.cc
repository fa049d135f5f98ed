// RemoteWorker against a WorkerService served in this process on a loopback port, over an
// engine on the real model: the same tokens, logprobs and end-of-generation as the engine
// itself; errors and cancellation cross the wire; a worker that stops
// answering heartbeats, or whose server goes away mid-stream, ends its streams with
// kUnavailable and its Load() goes Unavailable; a draining worker finishes its streams.
#include "scheduler/cluster/remote_worker.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"
#include "scheduler/engine/engine_test_support.h"
#include "server/worker/worker_service.h"

namespace loom {
namespace {

using testing::EventCollector;
using testing::RunToEnd;
using testing::WorkerWorld;

// Forwards to `inner`; Load() fails while fail_load is set: a worker whose heartbeats
// fail while its streams still run.
class LoadFailingWorker final : public Worker {
 public:
  explicit LoadFailingWorker(Worker* inner) : inner_(inner) {}
  const std::string& name() const override { return inner_->name(); }
  absl::StatusOr<uint64_t> Start(WorkerRequest r, WorkerCallback cb) override {
    return inner_->Start(std::move(r), std::move(cb));
  }
  void Cancel(uint64_t handle) override { inner_->Cancel(handle); }
  absl::StatusOr<WorkerLoad> Load() override {
    if (fail_load) return absl::UnavailableError("load withheld by the test");
    return inner_->Load();
  }
  std::atomic<bool> fail_load{false};

 private:
  Worker* const inner_;
};

// A WorkerService over `worker` on 127.0.0.1:<free port>.
struct LoopbackServer {
  explicit LoopbackServer(Worker* worker) : service(worker, &serving, nullptr) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    serving = true;
  }
  ~LoopbackServer() { Stop(); }
  void Stop() {
    if (server) server->Shutdown(std::chrono::system_clock::now());
    server.reset();
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }

  std::atomic<bool> serving{false};
  WorkerService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// Waits (polling; no timing assertion) until `pred` holds or ~20 s pass.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 2000; ++i) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return pred();
}

class RemoteWorkerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto w = WorkerWorld::Create(std::string(std::getenv("TEST_TMPDIR")) + "/adapters");
    ASSERT_TRUE(w.ok()) << w.status();
    world_ = w->release();
    ASSERT_TRUE(world_->store->Register("a0", world_->adapter_dir + "/a0").ok());
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
  }

  void SetUp() override {
    local_ = world_->engine.get();
    served_ = std::make_unique<LoadFailingWorker>(local_);
    server_ = std::make_unique<LoopbackServer>(served_.get());
    ASSERT_NE(server_->server, nullptr);
    RemoteWorkerOptions ro;
    ro.target = server_->target();
    ro.heartbeat_interval = absl::Milliseconds(50);
    auto r = RemoteWorker::Create(ro);
    ASSERT_TRUE(r.ok()) << r.status();
    remote_ = *std::move(r);
    ASSERT_TRUE(remote_->WaitUntilReady(absl::Seconds(30)).ok());
  }
  void TearDown() override {
    remote_.reset();
    server_.reset();
    served_.reset();
  }

  static WorkerRequest Request(const std::string& text, int max_new_tokens) {
    WorkerRequest r;
    r.context = testing::Encode(*world_, text);
    r.max_new_tokens = max_new_tokens;
    r.stop_at_end_of_generation = false;
    return r;
  }

  static inline WorkerWorld* world_ = nullptr;
  Engine* local_ = nullptr;
  std::unique_ptr<LoadFailingWorker> served_;
  std::unique_ptr<LoopbackServer> server_;
  std::unique_ptr<RemoteWorker> remote_;
};

TEST_F(RemoteWorkerTest, SameTokensLogprobsAndEndAsTheEngine) {
  std::vector<WorkerRequest> requests;
  requests.push_back(Request("The capital of France is", 16));
  WorkerRequest seeded = Request("Once upon a time,", 16);
  seeded.sampling.temperature = 1.2f;
  seeded.sampling.top_k = 50;
  seeded.sampling.has_seed = true;
  seeded.sampling.seed = 7;
  seeded.generated_before = 2;
  requests.push_back(seeded);
  WorkerRequest adapter = Request("def fibonacci(n):", 12);
  adapter.adapter_id = "a0";
  adapter.top_logprobs = 2;
  requests.push_back(adapter);
  absl::StatusOr<std::vector<int32_t>> chat = world_->chat->Render(
      {{"user", "What is 2 + 2?"}}, /*add_generation_prompt=*/true);
  ASSERT_TRUE(chat.ok());
  WorkerRequest ends;
  ends.context = *chat;
  ends.max_new_tokens = 160;
  ends.stop_at_end_of_generation = true;
  requests.push_back(ends);
  for (const WorkerRequest& r : requests) {
    auto local = RunToEnd(local_, r);
    auto remote = RunToEnd(remote_.get(), r);
    ASSERT_TRUE(local->final_event().error.ok()) << local->final_event().error;
    ASSERT_TRUE(remote->final_event().error.ok()) << remote->final_event().error;
    EXPECT_FALSE(remote->tokens().empty());
    EXPECT_EQ(remote->tokens(), local->tokens());
    EXPECT_EQ(remote->logprobs(), local->logprobs());
    EXPECT_EQ(remote->top_logprobs(), local->top_logprobs());
    EXPECT_EQ(remote->final_event().end_of_generation, local->final_event().end_of_generation);
    EXPECT_EQ(remote->finished_events(), 1);
    EXPECT_FALSE(remote->event_after_final());
  }
  EXPECT_EQ(requests[2].top_logprobs, 2);
  // The last request really ended on an end-of-generation token.
  EXPECT_TRUE(RunToEnd(remote_.get(), requests[3])->final_event().end_of_generation);
}

TEST_F(RemoteWorkerTest, ConcurrentStreamsEachEqualAlone) {
  const char* texts[] = {"Water boils at", "The three primary colors are", "My favourite book is",
                         "Hello, my name is"};
  std::vector<std::vector<int32_t>> alone;
  for (const char* t : texts) alone.push_back(RunToEnd(local_, Request(t, 12))->tokens());
  std::vector<std::unique_ptr<EventCollector>> cs;
  for (const char* t : texts) {
    cs.push_back(std::make_unique<EventCollector>());
    ASSERT_TRUE(remote_->Start(Request(t, 12), cs.back()->Callback()).ok());
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    cs[i]->Wait();
    ASSERT_TRUE(cs[i]->final_event().error.ok());
    EXPECT_EQ(cs[i]->tokens(), alone[i]) << texts[i];
  }
}

TEST_F(RemoteWorkerTest, ErrorsAndCancellationCrossTheWire) {
  WorkerRequest bad = Request("Hi", 4);
  bad.max_new_tokens = 0;  // the worker's engine refuses it; the refusal crosses the wire
  auto refused = RunToEnd(remote_.get(), bad);
  EXPECT_EQ(refused->final_event().error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused->final_event().error.message().find("max_new_tokens"), std::string::npos);
  WorkerRequest unknown = Request("Hi", 4);
  unknown.adapter_id = "nope";
  EXPECT_EQ(RunToEnd(remote_.get(), unknown)->final_event().error.code(),
            absl::StatusCode::kNotFound);
  WorkerRequest too_long = Request("Hi", 4);
  too_long.max_new_tokens = world_->engine->max_context();
  auto tl = RunToEnd(remote_.get(), too_long);
  EXPECT_EQ(tl->final_event().error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tl->final_event().error.message().find("context"), std::string::npos);

  EventCollector long_run;
  absl::StatusOr<uint64_t> h = remote_->Start(Request("Once upon a time", 400), long_run.Callback());
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(Eventually([&] { return !long_run.tokens().empty(); }));
  remote_->Cancel(*h);
  long_run.Wait();
  EXPECT_EQ(long_run.final_event().error.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(long_run.tokens().size(), 400u);
  // The worker side let go of it too.
  EXPECT_TRUE(Eventually([&] { return world_->engine->GetStats().running == 0; }));
}

TEST_F(RemoteWorkerTest, DeadlineEndsTheStreamAndTheWorkersRequest) {
  WorkerRequest r = Request("Once upon a time", 1000);
  r.deadline = absl::Now() + absl::Milliseconds(300);
  auto c = RunToEnd(remote_.get(), r);
  EXPECT_EQ(c->final_event().error.code(), absl::StatusCode::kDeadlineExceeded)
      << c->final_event().error;
  EXPECT_LT(c->tokens().size(), 1000u);
  EXPECT_TRUE(Eventually([&] { return world_->engine->GetStats().running == 0; }));
}

TEST_F(RemoteWorkerTest, LoadIsTheWorkersReport) {
  absl::StatusOr<WorkerLoad> remote = remote_->Load();
  ASSERT_TRUE(remote.ok()) << remote.status();
  absl::StatusOr<WorkerLoad> local = local_->Load();
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(remote->kv_pages_total, local->kv_pages_total);
  EXPECT_EQ(remote->max_batch_size, world_->engine_options.max_running);
  EXPECT_EQ(remote->resident_adapters, local->resident_adapters);
  // Steps advance in later reports.
  const uint64_t before = remote->steps;
  RunToEnd(remote_.get(), Request("Hello", 4));
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<WorkerLoad> l = remote_->Load();
    return l.ok() && l->steps >= before + 4;
  }));
}

TEST_F(RemoteWorkerTest, MissedHeartbeatsFailOpenStreamsThenRecover) {
  EventCollector c;
  ASSERT_TRUE(remote_->Start(Request("Once upon a time", 400), c.Callback()).ok());
  ASSERT_TRUE(Eventually([&] { return !c.tokens().empty(); }));
  served_->fail_load = true;  // heartbeats now fail UNAVAILABLE; the stream itself runs on
  c.Wait();
  EXPECT_EQ(c.final_event().error.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.final_event().error.message().find("heartbeat"), std::string::npos)
      << c.final_event().error;
  EXPECT_LT(c.tokens().size(), 400u);
  EXPECT_EQ(remote_->Load().status().code(), absl::StatusCode::kUnavailable);
  EventCollector refused;
  EXPECT_EQ(remote_->Start(Request("Hi", 2), refused.Callback()).status().code(),
            absl::StatusCode::kUnavailable);
  // The worker cancels the abandoned request when the call is cancelled.
  EXPECT_TRUE(Eventually([&] { return world_->engine->GetStats().running == 0; }));
  served_->fail_load = false;
  ASSERT_TRUE(remote_->WaitUntilReady(absl::Seconds(30)).ok());
  auto again = RunToEnd(remote_.get(), Request("Hi", 2));
  EXPECT_TRUE(again->final_event().error.ok()) << again->final_event().error;
}

// A draining worker (SIGTERM in loomd) still answers heartbeats, flagged draining, so its
// running stream finishes normally; new streams fail kUnavailable.
TEST_F(RemoteWorkerTest, DrainingWorkerFinishesRunningStreamsAndRefusesNewOnes) {
  const WorkerRequest r = Request("Once upon a time", 30);
  const std::vector<int32_t> alone = RunToEnd(local_, r)->tokens();
  EventCollector c;
  ASSERT_TRUE(remote_->Start(r, c.Callback()).ok());
  ASSERT_TRUE(Eventually([&] { return !c.tokens().empty(); }));
  server_->serving = false;
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<WorkerLoad> l = remote_->Load();
    return l.ok() && l->draining;
  }));
  auto refused = RunToEnd(remote_.get(), Request("Hi", 2));
  EXPECT_EQ(refused->final_event().error.code(), absl::StatusCode::kUnavailable);
  c.Wait();
  EXPECT_TRUE(c.final_event().error.ok()) << c.final_event().error;
  EXPECT_EQ(c.tokens(), alone);
  server_->serving = true;
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<WorkerLoad> l = remote_->Load();
    return l.ok() && !l->draining;
  }));
}

TEST_F(RemoteWorkerTest, ServerGoneMidStreamEndsUnavailable) {
  EventCollector c;
  ASSERT_TRUE(remote_->Start(Request("Once upon a time", 400), c.Callback()).ok());
  ASSERT_TRUE(Eventually([&] { return !c.tokens().empty(); }));
  server_->Stop();  // cancels the call from the server side, then stops listening
  c.Wait();
  EXPECT_EQ(c.final_event().error.code(), absl::StatusCode::kUnavailable)
      << c.final_event().error;
  EXPECT_EQ(c.finished_events(), 1);
  EXPECT_TRUE(Eventually([&] { return !remote_->Load().ok(); }));
  EXPECT_EQ(remote_->Load().status().code(), absl::StatusCode::kUnavailable);
}

TEST(RemoteWorkerOptionsTest, BadOptionsAndNoWorker) {
  RemoteWorkerOptions o;
  EXPECT_EQ(RemoteWorker::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.target = "127.0.0.1:1";
  o.missed_heartbeats = 0;
  EXPECT_EQ(RemoteWorker::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.missed_heartbeats = 3;
  o.heartbeat_interval = absl::ZeroDuration();
  EXPECT_EQ(RemoteWorker::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing listens on port 1: never ready, Start and Load refuse.
  o.heartbeat_interval = absl::Milliseconds(20);
  auto w = RemoteWorker::Create(o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->WaitUntilReady(absl::Milliseconds(200)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*w)->Load().status().code(), absl::StatusCode::kUnavailable);
  WorkerRequest r;
  r.context = {1, 2};
  r.max_new_tokens = 1;
  EXPECT_EQ((*w)->Start(r, [](const WorkerEvent&) {}).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace loom
