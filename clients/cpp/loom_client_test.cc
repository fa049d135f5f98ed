#include "clients/cpp/loom_client.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace loom {
namespace {

// Generate streams the prompt text back one character per message (token id = byte
// value), then a final message; it fails with the status named by adapter_id
// "fail-<code>"; it records the authorization metadata it saw.
class FakeInference final : public v1::Inference::Service {
 public:
  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    RecordAuth(ctx);
    if (req->adapter_id() == "fail-not-found") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown adapter 'fail-not-found'");
    }
    if (req->prompt_case() != v1::GenerateRequest::kText) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt: text required");
    }
    // One message per UTF-8 character; one token per byte.
    int n = 0;
    const std::string& text = req->text();
    for (size_t i = 0; i < text.size();) {
      if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
      size_t len = 1;
      while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
      v1::GenerateResponse m;
      m.set_text(text.substr(i, len));
      for (size_t k = 0; k < len; ++k) m.add_token_ids(static_cast<unsigned char>(text[i + k]));
      if (!writer->Write(m)) return grpc::Status::CANCELLED;
      n += static_cast<int>(len);
      i += len;
    }
    v1::GenerateResponse last;
    last.set_finish_reason(v1::FINISH_REASON_LENGTH);
    last.mutable_usage()->set_prompt_tokens(static_cast<int>(req->text().size()));
    last.mutable_usage()->set_completion_tokens(n);
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status Tokenize(grpc::ServerContext* ctx, const v1::TokenizeRequest* req,
                        v1::TokenizeResponse* resp) override {
    RecordAuth(ctx);
    for (char c : req->text()) resp->add_token_ids(static_cast<unsigned char>(c));
    return grpc::Status::OK;
  }

  std::string last_auth() {
    absl::MutexLock l(&mu_);
    return last_auth_;
  }

 private:
  void RecordAuth(grpc::ServerContext* ctx) {
    auto it = ctx->client_metadata().find("authorization");
    absl::MutexLock l(&mu_);
    last_auth_ = it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
  }
  absl::Mutex mu_;
  std::string last_auth_;
};

class FakeAdmin final : public v1::Admin::Service {
 public:
  grpc::Status LoadAdapter(grpc::ServerContext*, const v1::LoadAdapterRequest* req,
                           v1::LoadAdapterResponse* resp) override {
    if (req->source().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "source: empty");
    }
    resp->mutable_adapter()->set_id(req->id());
    resp->mutable_adapter()->set_source(req->source());
    resp->mutable_adapter()->set_pinned(req->pin());
    resp->mutable_adapter()->set_state(v1::ADAPTER_STATE_READY);
    return grpc::Status::OK;
  }
  grpc::Status UnloadAdapter(grpc::ServerContext*, const v1::UnloadAdapterRequest* req,
                             v1::UnloadAdapterResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no adapter '" + req->id() + "'");
  }
};

class LoomClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.RegisterService(&inference_);
    builder.RegisterService(&admin_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ClientOptions options;
    options.token = "s3cret";
    options.deadline = absl::Seconds(20);
    client_ = LoomClient::FromChannel(server_->InProcessChannel(grpc::ChannelArguments()),
                                      options);
  }
  void TearDown() override { server_->Shutdown(); }

  FakeInference inference_;
  FakeAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<LoomClient> client_;
};

v1::GenerateRequest TextRequest(const std::string& text) {
  v1::GenerateRequest r;
  r.set_text(text);
  return r;
}

TEST_F(LoomClientTest, GenerateAllConcatenatesStreamAndSendsToken) {
  absl::StatusOr<GenerateResult> r = client_->GenerateAll(TextRequest("héllo"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "héllo");
  EXPECT_EQ(r->token_ids.size(), std::string("héllo").size());  // 6 bytes
  EXPECT_EQ(r->finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r->usage.completion_tokens(), 6);
  EXPECT_EQ(inference_.last_auth(), "Bearer s3cret");
}

TEST_F(LoomClientTest, ServerStatusKeepsCodeAndMessage) {
  v1::GenerateRequest req = TextRequest("x");
  req.set_adapter_id("fail-not-found");
  absl::StatusOr<GenerateResult> r = client_->GenerateAll(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "unknown adapter 'fail-not-found'");

  absl::StatusOr<v1::AdapterInfo> load = client_->LoadAdapter("a", "", false);
  EXPECT_EQ(load.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<v1::UnloadAdapterResponse> unload = client_->UnloadAdapter("zz");
  EXPECT_EQ(unload.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unload.status().message(), "no adapter 'zz'");
  // Not implemented by the fake: the default service answers UNIMPLEMENTED.
  EXPECT_EQ(client_->GetStatus().status().code(), absl::StatusCode::kUnimplemented);
}

TEST_F(LoomClientTest, AdminRoundTrip) {
  absl::StatusOr<v1::AdapterInfo> info = client_->LoadAdapter("ad-1", "/x/y", true);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->id(), "ad-1");
  EXPECT_EQ(info->source(), "/x/y");
  EXPECT_TRUE(info->pinned());
}

TEST_F(LoomClientTest, PullStreamAndEarlyCancel) {
  auto stream = client_->StartGenerate(TextRequest("abc"));
  ASSERT_TRUE(stream.ok());
  v1::GenerateResponse m;
  std::string text;
  while ((*stream)->Next(&m)) text += m.text();
  EXPECT_TRUE((*stream)->Finish().ok());
  EXPECT_EQ(text, "abc");

  // Returning false from the callback cancels: the call ends CANCELLED.
  int seen = 0;
  absl::Status s = client_->Generate(TextRequest(std::string(1000, 'z')),
                                     [&seen](const v1::GenerateResponse&) {
                                       ++seen;
                                       return seen < 2;
                                     });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_GE(seen, 2);
  EXPECT_LT(seen, 1001);
}

TEST_F(LoomClientTest, AsyncGenerateDeliversEveryMessageThenDone) {
  std::string text;
  int finals = 0;
  absl::Status done_status = absl::UnknownError("not done");
  absl::Notification done;
  client_->GenerateAsync(
      TextRequest("stream"),
      [&](const v1::GenerateResponse& m) {
        text += m.text();
        if (m.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) ++finals;
        return true;
      },
      [&](absl::Status s) {
        done_status = s;
        done.Notify();
      });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(done_status.ok()) << done_status;
  EXPECT_EQ(text, "stream");
  EXPECT_EQ(finals, 1);
}

TEST_F(LoomClientTest, TokenizeAndHealth) {
  absl::StatusOr<std::vector<int32_t>> ids = client_->TokenizeText("AB");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{65, 66}));
  auto health = client_->HealthCheck("");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
  // An unknown service name is NOT_FOUND per the health protocol.
  EXPECT_EQ(client_->HealthCheck("no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(LoomClientCreate, RejectsBadOptions) {
  EXPECT_EQ(LoomClient::Create("", {}).status().code(), absl::StatusCode::kInvalidArgument);
  ClientOptions half;
  half.tls_cert_file = "/nonexistent/cert.pem";
  EXPECT_EQ(LoomClient::Create("localhost:1", half).status().code(),
            absl::StatusCode::kInvalidArgument);
  ClientOptions missing;
  missing.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(LoomClient::Create("localhost:1", missing).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(LoomClient::Create("localhost:1", {}).ok());
}

}  // namespace
}  // namespace loom
