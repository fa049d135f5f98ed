// One request path: the same greedy request gives the same text through every way in:
// loom.v1.Inference over gRPC and the OpenAI HTTP API of a single loomd, `loom
// generate`, and both protocols of a router over a worker; for a text prompt, a chat
// prompt and an adapter. Also the edge's refusals on gRPC: a string field that is not
// UTF-8 is INVALID_ARGUMENT naming it, and an inference call without a valid API key is
// UNAUTHENTICATED.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/generic/generic_stub.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/loomd_process.h"

namespace loom::e2e {
namespace {

using nlohmann::json;

constexpr char kBase[] = "SmolLM2-135M-Instruct";
constexpr char kPrompt[] = "The capital of France is";
constexpr char kQuestion[] = "What is the capital of France?";
constexpr int kTokens = 24;

v1::GenerateRequest TextRequest(const std::string& adapter) {
  v1::GenerateRequest r;
  r.set_adapter_id(adapter);
  r.set_text(kPrompt);
  r.set_max_tokens(kTokens);
  r.set_ignore_eos(true);
  return r;
}

v1::GenerateRequest ChatRequest() {
  v1::GenerateRequest r;
  v1::ChatMessage* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content(kQuestion);
  r.set_max_tokens(kTokens);
  return r;
}

std::string Grpc(LoomdProcess& d, const v1::GenerateRequest& r) {
  absl::StatusOr<GenerateResult> g = d.Client()->GenerateAll(r);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? g->text : "<error>";
}

// The text of an OpenAI completion (or chat completion) for the same request.
std::string Http(LoomdProcess& d, const v1::GenerateRequest& r) {
  json body = {{"model", r.adapter_id().empty() ? kBase : r.adapter_id()},
               {"max_tokens", r.max_tokens()},
               {"temperature", 0},
               {"ignore_eos", r.ignore_eos()}};
  const bool chat = r.has_chat();
  if (chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", kQuestion}}});
  } else {
    body["prompt"] = r.text();
  }
  absl::StatusOr<HttpResponse> res =
      HttpPostJson(d.http_port(), chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
  EXPECT_TRUE(res.ok()) << res.status();
  if (!res.ok()) return "<error>";
  EXPECT_EQ(res->status, 200) << res->body;
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices")) return "<error: " + res->body + ">";
  return chat ? j["choices"][0]["message"]["content"].get<std::string>()
              : j["choices"][0]["text"].get<std::string>();
}

// `loom generate`'s completion: stdout up to the timing line it prints on stderr.
std::string LoomGenerate(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {Runfile("server/loom"), "generate", "--threads", "2",
                                   "--max-tokens", absl::StrCat(kTokens)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t timing = r.output.rfind("\n[loom] prompt:");
  EXPECT_NE(timing, std::string::npos) << r.output;
  return timing == std::string::npos ? r.output : r.output.substr(0, timing);
}

class OneRequestPathE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(TempDir("adapters"));
    ASSERT_TRUE(MakeTestAdapter(*root_ + "/tenant-a", 8, 3).ok());
  }
  static inline std::string* root_ = nullptr;
};

TEST_F(OneRequestPathE2e, SameGreedyTextThroughEveryWayIn) {
  const std::string roots = "--adapter_roots=" + *root_;
  auto single = LoomdProcess::Start({roots});
  ASSERT_TRUE(single.ok()) << single.status();
  const std::string text = Grpc(**single, TextRequest(""));
  const std::string chat = Grpc(**single, ChatRequest());
  const std::string adapted = Grpc(**single, TextRequest("tenant-a"));
  ASSERT_FALSE(text.empty());
  EXPECT_NE(adapted, text);  // the adapter is applied
  EXPECT_EQ(Http(**single, TextRequest("")), text);
  EXPECT_EQ(Http(**single, ChatRequest()), chat);
  EXPECT_EQ(Http(**single, TextRequest("tenant-a")), adapted);
  EXPECT_EQ((*single)->Stop(), 0) << (*single)->Log();

  // loom generate: the same engine, frontend and validation in one process.
  EXPECT_EQ(LoomGenerate({"--ignore-eos", kPrompt}), text);
  EXPECT_EQ(LoomGenerate({"--chat", "--default-system", kQuestion}), chat);
  EXPECT_EQ(LoomGenerate({"--ignore-eos", "--adapter", *root_ + "/tenant-a", kPrompt}), adapted);

  // A router over one worker, both protocols.
  auto worker = LoomdProcess::Start({roots, "--role=worker"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  auto router = LoomdProcess::Start(
      {"--role=router", absl::StrCat("--workers=", (*worker)->target())});
  ASSERT_TRUE(router.ok()) << router.status();
  EXPECT_EQ(Grpc(**router, TextRequest("")), text);
  EXPECT_EQ(Grpc(**router, ChatRequest()), chat);
  EXPECT_EQ(Grpc(**router, TextRequest("tenant-a")), adapted);
  EXPECT_EQ(Http(**router, TextRequest("")), text);
  EXPECT_EQ(Http(**router, ChatRequest()), chat);
  EXPECT_EQ(Http(**router, TextRequest("tenant-a")), adapted);
  EXPECT_EQ((*router)->Stop(), 0) << (*router)->Log();
  EXPECT_EQ((*worker)->Stop(), 0) << (*worker)->Log();
}

// A Generate call with raw bytes: field 2 (text) holding invalid UTF-8, which protobuf's
// own parser refuses without a word.
TEST_F(OneRequestPathE2e, GrpcEdgeRefusalsAreClear) {
  const std::string keys = TempDir("keys") + "/api_keys.json";
  FILE* f = std::fopen(keys.c_str(), "w");
  std::fputs(R"({"tenants": {"acme": {"keys": ["sk-acme-e2e-0001"]}}})", f);
  std::fclose(f);
  auto d = LoomdProcess::Start({"--api_keys_file=" + keys});
  ASSERT_TRUE(d.ok()) << d.status();
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel((*d)->target(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  auto call = [&](const std::string& bytes, const std::string& key) {
    grpc::ClientContext ctx;
    if (!key.empty()) ctx.AddMetadata("authorization", "Bearer " + key);
    grpc::CompletionQueue cq;
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> rw =
        stub.PrepareCall(&ctx, "/loom.v1.Inference/Generate", &cq);
    void* tag = nullptr;
    bool ok = false;
    rw->StartCall(reinterpret_cast<void*>(1));
    cq.Next(&tag, &ok);
    rw->Write(request, reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
    rw->WritesDone(reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    grpc::ByteBuffer reply;
    for (;;) {
      rw->Read(&reply, reinterpret_cast<void*>(4));
      cq.Next(&tag, &ok);
      if (!ok) break;
    }
    grpc::Status status;
    rw->Finish(&status, reinterpret_cast<void*>(5));
    cq.Next(&tag, &ok);
    return status;
  };
  // GenerateRequest{text = "ab\xff"}: tag 0x12 (field 2, length-delimited), length 3.
  const std::string bad_utf8("\x12\x03" "ab\xff", 5);
  grpc::Status s = call(bad_utf8, "sk-acme-e2e-0001");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(s.error_message(), "field 'text' is not valid UTF-8");
  // A valid request without, or with a wrong, key.
  v1::GenerateRequest ok_request = TextRequest("");
  ok_request.set_max_tokens(2);
  const std::string bytes = ok_request.SerializeAsString();
  s = call(bytes, "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  s = call(bytes, "sk-wrong-e2e-0000");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(call(bytes, "sk-acme-e2e-0001").ok());
  EXPECT_EQ((*d)->Stop(), 0) << (*d)->Log();
}

}  // namespace
}  // namespace loom::e2e
