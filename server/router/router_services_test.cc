// The router role's services over an in-process gRPC server and a ClusterFrontend of
// FakeWorkers: the one InferenceService's Generate text equals the fake model's
// uninterrupted run (also across a worker death), Tokenize is local, GetStatus /
// DrainWorker / metrics reflect the cluster.
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
#include "scheduler/worker/fake_worker.h"
#include "server/inference_edge.h"
#include "server/inference_service.h"
#include "server/model_catalog.h"
#include "server/metrics/server_metrics.h"
#include "server/router/admin_fanout.h"
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
    frontend_ = *ClusterFrontend::Create(model_.tokenizer.get(), o);
    FakeWorker::Options a;
    a.name = "127.0.0.1:1";
    a.stall_at = 6;
    auto wa = std::make_unique<FakeWorker>(a);
    a_ = wa.get();
    ASSERT_TRUE(frontend_->AddWorker(std::move(wa)).ok());
    catalog_ = std::make_unique<ClusterModelCatalog>(model_.name, 512, frontend_.get());
    RequestLimits limits;
    limits.max_context = 512;
    edge_ = std::make_unique<InferenceEdge>(InferenceEdge::Deps{
        &model_, frontend_.get(), catalog_.get(), &admission_, limits, &metrics_, &serving_});
    inference_ = std::make_unique<InferenceService>(edge_.get());
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
  Admission admission_{AdmissionOptions()};
  std::unique_ptr<ClusterModelCatalog> catalog_;
  std::unique_ptr<InferenceEdge> edge_;
  std::unique_ptr<InferenceService> inference_;
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

// Adapter calls on the router go to every worker's Admin service (port = worker port +
// offset here): load succeeds only when all succeed, list is the union, errors name the
// worker, and the caller's authorization header is forwarded.
class FakeWorkerAdmin final : public v1::Admin::Service {
 public:
  explicit FakeWorkerAdmin(std::string tag) : tag_(std::move(tag)) {}
  grpc::Status LoadAdapter(grpc::ServerContext* ctx, const v1::LoadAdapterRequest* req,
                           v1::LoadAdapterResponse* resp) override {
    auto it = ctx->client_metadata().find("authorization");
    if (it == ctx->client_metadata().end() ||
        std::string(it->second.data(), it->second.size()) != "Bearer t") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token");
    }
    if (req->id() == "bad-" + tag_) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "malformed");
    }
    absl::MutexLock l(&mu_);
    ids_.push_back(req->id());
    resp->mutable_adapter()->set_id(req->id());
    resp->mutable_adapter()->set_state(v1::ADAPTER_STATE_READY);
    return grpc::Status::OK;
  }
  grpc::Status ListAdapters(grpc::ServerContext*, const v1::ListAdaptersRequest*,
                            v1::ListAdaptersResponse* resp) override {
    absl::MutexLock l(&mu_);
    for (const std::string& id : ids_) resp->add_adapters()->set_id(id);
    resp->add_adapters()->set_id("only-" + tag_);
    return grpc::Status::OK;
  }
  std::vector<std::string> ids() {
    absl::MutexLock l(&mu_);
    return ids_;
  }

 private:
  const std::string tag_;
  absl::Mutex mu_;
  std::vector<std::string> ids_;
};

TEST_F(RouterServicesTest, AdapterCallsFanOutToEveryWorker) {
  FakeWorkerAdmin admin_a("a"), admin_b("b");
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<int> ports;
  for (FakeWorkerAdmin* svc : {&admin_a, &admin_b}) {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(svc);
    servers.push_back(b.BuildAndStart());
    ASSERT_GT(port, 1);
    ports.push_back(port);
  }
  // Two router workers whose admin ports are their ports + 1; the fixture's worker is
  // killed so only these two are up.
  a_->Kill();
  for (int port : ports) {
    FakeWorker::Options o;
    o.name = absl::StrCat("127.0.0.1:", port - 1);
    ASSERT_TRUE(frontend_->AddWorker(std::make_unique<FakeWorker>(o)).ok());
  }
  ASSERT_TRUE(WaitFor([&] {
    int up = 0;
    for (const ClusterWorkerStatus& w : frontend_->GetStatus().workers) up += w.up;
    return up == 2;
  }));
  AdminFanout fanout(0, 1);
  EXPECT_EQ(*fanout.AdminTarget("10.0.0.1:7"), "10.0.0.1:8");
  EXPECT_EQ(*AdminFanout(9000, 0).AdminTarget("[::1]:7"), "[::1]:9000");
  RouterAdminService admin(&model_, frontend_.get(), BearerAuth(), &serving_, 16, &fanout);
  grpc::ServerBuilder b;
  b.RegisterService(&admin);
  std::unique_ptr<grpc::Server> router_admin = b.BuildAndStart();
  ClientOptions co;
  co.token = "t";
  auto client = LoomClient::FromChannel(router_admin->InProcessChannel(grpc::ChannelArguments()),
                                        co);

  absl::StatusOr<v1::AdapterInfo> loaded = client->LoadAdapter("tenant-1", "/x", false);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id(), "tenant-1");
  EXPECT_EQ(admin_a.ids(), std::vector<std::string>{"tenant-1"});
  EXPECT_EQ(admin_b.ids(), std::vector<std::string>{"tenant-1"});
  absl::StatusOr<v1::AdapterInfo> bad = client->LoadAdapter("bad-b", "/x", false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find(absl::StrCat("127.0.0.1:", ports[1] - 1)),
            std::string::npos)
      << bad.status();
  absl::StatusOr<v1::ListAdaptersResponse> list = client->ListAdapters();
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> ids;
  for (const auto& a : list->adapters()) ids.push_back(a.id());
  // a loaded "bad-b" (only b refused it): the union shows it.
  EXPECT_EQ(ids, (std::vector<std::string>{"bad-b", "only-a", "only-b", "tenant-1"}));
  // Without a fanout the calls say how to enable them.
  EXPECT_EQ(client_->ListAdapters().status().code(), absl::StatusCode::kUnimplemented);
  router_admin->Shutdown();
  for (auto& s : servers) s->Shutdown();
}

}  // namespace
}  // namespace loom
