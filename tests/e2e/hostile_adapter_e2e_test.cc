// The probed attacks of issue 16 against the real loomd, through on-demand loading (the
// default): an unauthenticated inference request that names an adapter id makes the
// daemon parse files someone else wrote under the adapter roots. Each hostile adapter
// must be refused with its clear status while the daemon keeps serving, and SIGTERM must
// still exit 0 within the grace afterwards.
//   deep        target_modules nested 30,000 groups deep (std::regex: stack overflow)
//   longname    GGUF-LoRA tensor name of 60,000 characters (std::regex: stack overflow)
//   hang        target_modules "(.|.)*Z" (backtracking: never ends; blocked every load)
//   alpha       lora_alpha = 1e39 (loaded READY, -inf logprobs)
//   escape      adapter_model.safetensors symlinked outside the roots (loaded from there;
//               a parse error echoed the outside file's first bytes)
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "models/weights/gguf_writer.h"
#include "nlohmann/json.hpp"
#include "proto/loom/v1/admin.grpc.pb.h"
#include "tests/e2e/loomd_process.h"

namespace loom::e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "SECRET-BYTES-OUTSIDE-THE-ROOTS";

void EditConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& fn) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/adapter_config.json"));
  fn(j);
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << j.dump();
}

void WriteLongNameGgufLora(const std::string& path) {
  GgufWriter w;
  w.AddString("general.type", "adapter");
  w.AddString("adapter.type", "lora");
  w.AddF32("adapter.lora.alpha", 16);
  const std::string name = "blk.0." + std::string(60000, 'a') + ".weight.lora_a";
  ASSERT_TRUE(w.AddF32Tensor(name, {1}, {0.0f}).ok());
  ASSERT_TRUE(w.WriteFile(path).ok());
}

class HostileAdapterE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new std::string(TempDir("hostile"));
    root_ = new std::string(*base_ + "/root");
    const std::string outside = *base_ + "/outside";
    fs::create_directories(*root_);
    fs::create_directories(outside);
    for (const char* id : {"good", "deep", "hang", "alpha", "escape"}) {
      absl::Status s = MakeTestAdapter(*root_ + "/" + id, 8, 7);
      ASSERT_TRUE(s.ok()) << s;
    }
    EditConfig(*root_ + "/deep", [](nlohmann::json& j) {
      j["target_modules"] = std::string(30000, '(') + "q_proj" + std::string(30000, ')');
    });
    EditConfig(*root_ + "/hang", [](nlohmann::json& j) { j["target_modules"] = "(.|.)*Z"; });
    EditConfig(*root_ + "/alpha", [](nlohmann::json& j) { j["lora_alpha"] = 1e39; });
    WriteLongNameGgufLora(*root_ + "/longname.gguf");
    std::ofstream(outside + "/secret", std::ios::binary) << kSecret;
    const std::string st = *root_ + "/escape/adapter_model.safetensors";
    fs::remove(st);
    fs::create_symlink(outside + "/secret", st);
    std::ofstream(*base_ + "/token") << "s3cret\n";
  }

  static v1::GenerateRequest Request(const std::string& adapter) {
    v1::GenerateRequest r;
    r.set_text("The capital of France is");
    r.set_adapter_id(adapter);
    r.set_max_tokens(4);
    r.set_ignore_eos(true);
    return r;
  }

  static inline std::string* base_ = nullptr;
  static inline std::string* root_ = nullptr;
};

// The decimal that a "header length" error would print for the secret's first 8 bytes.
std::string SecretAsHeaderLength() {
  uint64_t n = 0;
  std::memcpy(&n, kSecret, 8);
  return std::to_string(n);
}

TEST_F(HostileAdapterE2eTest, EveryHostileAdapterIsRefusedAndTheDaemonKeepsServing) {
  auto loomd = LoomdProcess::Start({"--adapter_roots=" + *root_, "--shutdown_grace=5s",
                                    "--admin_token_file=" + *base_ + "/token"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  LoomdProcess& d = **loomd;
  ClientOptions options;
  options.generate_deadline = absl::Seconds(60);  // a hang shows as DEADLINE_EXCEEDED
  absl::StatusOr<std::unique_ptr<LoomClient>> c = LoomClient::Create(d.target(), options);
  ASSERT_TRUE(c.ok()) << c.status();

  struct Case {
    const char* id;
    absl::StatusCode code;
    const char* reason;
  };
  const Case cases[] = {
      {"deep", absl::StatusCode::kFailedPrecondition, "target_modules"},
      {"longname", absl::StatusCode::kFailedPrecondition, "name longer than 256 bytes"},
      {"hang", absl::StatusCode::kFailedPrecondition, "selects none"},
      {"alpha", absl::StatusCode::kFailedPrecondition, "lora_alpha = 1e+39"},
      {"escape", absl::StatusCode::kPermissionDenied, "adapter_model.safetensors"},
  };
  for (const Case& k : cases) {
    const absl::Status s = (*c)->GenerateAll(Request(k.id)).status();
    EXPECT_EQ(s.code(), k.code) << k.id << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.reason)) << k.id;
    EXPECT_LT(s.message().size(), 2000u) << k.id << ": the error echoes unbounded text";
    ASSERT_TRUE((*c)->HealthCheck("").ok()) << "loomd died on " << k.id << "\n" << d.Log();
  }
  const absl::Status escaped = (*c)->GenerateAll(Request("escape")).status();
  EXPECT_THAT(std::string(escaped.message()), Not(HasSubstr(kSecret)));
  EXPECT_THAT(std::string(escaped.message()), Not(HasSubstr(SecretAsHeaderLength())));

  // Still serving: the base model and a good adapter loaded on demand after them all.
  EXPECT_TRUE((*c)->GenerateAll(Request("")).ok());
  absl::StatusOr<GenerateResult> good = (*c)->GenerateAll(Request("good"));
  EXPECT_TRUE(good.ok()) << good.status();

  // DrainWorker is a router's call: a single loomd answers UNIMPLEMENTED, but only to a
  // caller with the token (it used to answer everyone before checking auth).
  auto stub = v1::Admin::NewStub(
      grpc::CreateChannel(d.admin_target(), grpc::InsecureChannelCredentials()));
  v1::DrainWorkerRequest drain;
  drain.set_worker("127.0.0.1:1");
  v1::DrainWorkerResponse drained;
  grpc::ClientContext anonymous;
  EXPECT_EQ(stub->DrainWorker(&anonymous, drain, &drained).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext admin;
  admin.AddMetadata("authorization", "Bearer s3cret");
  EXPECT_EQ(stub->DrainWorker(&admin, drain, &drained).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  // SIGTERM exits 0 within the 5 s grace (plus start-up slack), nothing left loading.
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(d.Stop(absl::Seconds(30)), 0) << d.Log();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(15));
}

}  // namespace
}  // namespace loom::e2e
