// Runs the loom_bench binary against an in-process fake Inference server and checks its
// JSON report against what the fake saw: request count, adapter ids of the workload,
// token counts, and one TTFT per request / one inter-token gap per later token.
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "proto/loom/v1/inference.grpc.pb.h"

namespace loom {
namespace {

// Streams max_tokens one-token messages, then a final message; "adapter-err" fails.
class FakeInference final : public v1::Inference::Service {
 public:
  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    {
      absl::MutexLock l(&mu_);
      ++adapters_[req->adapter_id()];
    }
    for (int i = 0; i < req->max_tokens(); ++i) {
      v1::GenerateResponse m;
      m.set_text("x");
      m.add_token_ids(i);
      writer->Write(m);
    }
    v1::GenerateResponse last;
    last.set_finish_reason(v1::FINISH_REASON_LENGTH);
    last.mutable_usage()->set_prompt_tokens(3);
    last.mutable_usage()->set_completion_tokens(req->max_tokens());
    writer->Write(last);
    return grpc::Status::OK;
  }
  std::map<std::string, int> adapters() {
    absl::MutexLock l(&mu_);
    return adapters_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, int> adapters_;
};

std::string RunCommand(const std::string& cmd, int* rc) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

TEST(LoomBench, DistinctWorkloadReportMatchesServer) {
  FakeInference fake;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&fake);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  int rc = -1;
  const std::string out = RunCommand(
      absl::StrCat("clients/bench/loom_bench --addr 127.0.0.1:", port,
                   " --requests 20 --rate 400 --workload distinct --adapters 4"
                   " --prompt-len 3 --max-tokens 5 --seed 9 --json"),
      &rc);
  server->Shutdown();
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json r = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << out;
  EXPECT_EQ(r["sent"], 20);
  EXPECT_EQ(r["completed"], 20);
  EXPECT_EQ(r["errors"], 0);
  EXPECT_EQ(r["output_tokens"], 100);
  EXPECT_EQ(r["prompt_tokens"], 60);
  EXPECT_EQ(r["ttft_ms"]["count"], 20);
  EXPECT_EQ(r["itl_ms"]["count"], 80);  // 4 gaps after the first of 5 tokens
  EXPECT_EQ(r["e2e_ms"]["count"], 20);
  EXPECT_GE(r["e2e_ms"]["p99"].get<double>(), r["e2e_ms"]["p50"].get<double>());
  // Distinct over a pool of 4: round robin, 5 requests each.
  const std::map<std::string, int> expected = {
      {"adapter-0", 5}, {"adapter-1", 5}, {"adapter-2", 5}, {"adapter-3", 5}};
  EXPECT_EQ(fake.adapters(), expected);
}

TEST(LoomBench, UnreachableServerIsReportedAsErrors) {
  int rc = -1;
  const std::string out = RunCommand(
      "clients/bench/loom_bench --addr 127.0.0.1:1 --requests 3 --rate 1000 --json", &rc);
  EXPECT_NE(rc, 0);
  nlohmann::json r = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << out;
  EXPECT_EQ(r["completed"], 0);
  EXPECT_EQ(r["errors_by_code"]["UNAVAILABLE"], 3);
}

}  // namespace
}  // namespace loom
