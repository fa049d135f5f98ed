// The router's services over an in-process gRPC server and a ClusterFrontend of
// FakeWorkers: Generate text equals the fake model's uninterrupted run (also across a
// worker death), Tokenize is local, GetStatus / DrainWorker / metrics reflect the cluster.
#include "server/router/router_services.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "clients/cpp/loom_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "models/tokenizer/test_vocab.h"
#include "scheduler/cluster/cluster_frontend.h"
#include "scheduler/cluster/fake_worker.h"
#include "server/metrics/server_metrics.h"
#include "server/router/router_metrics.h"

namespace loom {
namespace {

template <typename Pred>
bool WaitFor(Pred pred) {
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  while (!pred()) {
    if (absl::Now() > limit) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

class RouterServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_.vocab = testing::ByteLevelVocab({"<s>", "</s>"}, {});
    model_.vocab.add_bos = false;
    model_.name = "test-model";
    model_.tokenizer = *Tokenizer::Create(model_.vocab);
    ClusterOptions o;
    o.policy = "least_loaded";
    o.tick = absl::Milliseconds(5);
    o.idle_grace = absl::ZeroDuration();
    o.max_context = 512;
    frontend_ = *ClusterFrontend::Create(model_.tokenizer.get(), o);
    FakeWorker::Options a;
    a.name = "127.0.0.1:1";
    a.stall_at = 6;
    auto wa = std::make_unique<FakeWorker>(a);
    a_ = wa.get();
    ASSERT_TRUE(frontend_->AddWorker(std::move(wa)).ok());
    inference_ = std::make_unique<RouterInferenceService>(&model_, 512, frontend_.get(),
                                                          &metrics_, &serving_);
    admin_ = std::make_unique<RouterAdminService>(&model_, frontend_.get(), BearerAuth(),
                                                  &serving_, 16);
    grpc::ServerBuilder b;
    b.RegisterService(inference_.get());
    b.RegisterService(admin_.get());
    server_ = b.BuildAndStart();
    client_ = LoomClient::FromChannel(server_->InProcessChannel(grpc::ChannelArguments()), {});
  }
  void TearDown() override {
    server_->Shutdown();
    frontend_.reset();
  }

  std::string Reference(const std::vector<int32_t>& prompt, int n) {
    std::vector<int32_t> ctx = prompt, out;
    for (int i = 0; i < n; ++i) {
      const int32_t t = FakeWorker::NextToken("", ctx, -1);
      ctx.push_back(t);
      out.push_back(t);
    }
    return *model_.tokenizer->Decode(out);
  }

  ServingModel model_;
  ServerMetrics metrics_;
  std::atomic<bool> serving_{true};
  std::unique_ptr<ClusterFrontend> frontend_;
  FakeWorker* a_ = nullptr;
  std::unique_ptr<RouterInferenceService> inference_;
  std::unique_ptr<RouterAdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<LoomClient> client_;
};

TEST_F(RouterServicesTest, GenerateSurvivesWorkerDeathAndStatusShowsIt) {
  absl::StatusOr<std::vector<int32_t>> prompt = client_->TokenizeText("hello there");
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt, *model_.tokenizer->Encode("hello there", false));

  v1::GenerateRequest req;
  req.set_text("hello there");
  req.set_max_tokens(30);
  absl::StatusOr<std::unique_ptr<GenerateStream>> stream = client_->StartGenerate(req);
  ASSERT_TRUE(stream.ok());
  // The stall point holds the stream on worker a; add b, then kill a.
  ASSERT_TRUE(WaitFor([&] {
    const ClusterStatus s = frontend_->GetStatus();
    return !s.workers.empty() && s.workers[0].assigned == 1;
  }));
  FakeWorker::Options b;
  b.name = "127.0.0.1:2";
  ASSERT_TRUE(frontend_->AddWorker(std::make_unique<FakeWorker>(b)).ok());
  ASSERT_TRUE(WaitFor([&] {
    const ClusterStatus s = frontend_->GetStatus();
    return s.workers.size() == 2 && s.workers[1].up;
  }));
  absl::SleepFor(absl::Milliseconds(20));  // let a reach its stall point (any point works)
  a_->Kill();
  std::string text;
  v1::GenerateResponse msg;
  v1::GenerateResponse last;
  while ((*stream)->Next(&msg)) {
    text += msg.text();
    last = msg;
  }
  ASSERT_TRUE((*stream)->Finish().ok());
  EXPECT_EQ(text, Reference(*prompt, 30));
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(last.usage().completion_tokens(), 30);
  EXPECT_EQ(last.usage().prompt_tokens(), static_cast<int>(prompt->size()));

  absl::StatusOr<v1::GetStatusResponse> st = client_->GetStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->role(), "router");
  ASSERT_EQ(st->workers_size(), 2);
  EXPECT_EQ(st->workers(0).id(), "127.0.0.1:1");
  EXPECT_FALSE(st->workers(0).up());
  EXPECT_TRUE(st->workers(1).up());
  EXPECT_EQ(st->failovers(), 1u);

  // The snapshot is published after the iteration that ended the stream.
  ASSERT_TRUE(WaitFor([&] { return frontend_->GetStatus().idle_workers.size() == 1; }));
  RouterMetrics rm(&metrics_);
  rm.Update(frontend_->GetStatus());
  const std::string text_metrics = metrics_.Render();
  EXPECT_NE(text_metrics.find("loom_worker_up{worker=\"127.0.0.1:1\"} 0"), std::string::npos)
      << text_metrics;
  EXPECT_NE(text_metrics.find("loom_worker_up{worker=\"127.0.0.1:2\"} 1"), std::string::npos);
  EXPECT_NE(text_metrics.find("loom_router_failovers_total 1"), std::string::npos);
  EXPECT_NE(text_metrics.find("loom_idle_workers 1"), std::string::npos);
  EXPECT_NE(text_metrics.find("loom_worker_kv_pages_free{worker=\"127.0.0.1:2\"}"),
            std::string::npos);
  // Lint-clean under `promtool check metrics` (Debian's prometheus package), when present.
  if (access("/usr/bin/promtool", X_OK) == 0) {
    const std::string path = absl::StrCat(::testing::TempDir(), "/router_metrics.txt");
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(text_metrics.data(), 1, text_metrics.size(), f);
    std::fclose(f);
    const std::string cmd = "/usr/bin/promtool check metrics < " + path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[512];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << out;
    EXPECT_EQ(out, "");
  }
}

TEST_F(RouterServicesTest, DrainAndAdapterCalls) {
  grpc::ClientContext ctx;
  v1::DrainWorkerRequest req;
  req.set_worker("nope:1");
  v1::DrainWorkerResponse resp;
  v1::Admin::Stub stub(server_->InProcessChannel(grpc::ChannelArguments()));
  EXPECT_EQ(stub.DrainWorker(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx2;
  req.set_worker("127.0.0.1:1");
  ASSERT_TRUE(stub.DrainWorker(&ctx2, req, &resp).ok());
  ASSERT_TRUE(WaitFor([&] {
    const ClusterStatus s = frontend_->GetStatus();
    return !s.workers.empty() && s.workers[0].draining;
  }));
  EXPECT_EQ(client_->ListAdapters().status().code(), absl::StatusCode::kUnimplemented);
  // Request-side errors come back as statuses.
  v1::GenerateRequest bad;
  bad.set_text("x");
  bad.set_max_tokens(600);
  EXPECT_EQ(client_->GenerateAll(bad).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<v1::ListModelsResponse> models = client_->ListModels();
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(models->models(0).id(), "test-model");
  EXPECT_EQ(models->models(0).max_context(), 512);
}

}  // namespace
}  // namespace loom
