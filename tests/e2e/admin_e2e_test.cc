// End-to-end admin and error behaviour of the real loomd: loomctl loads and unloads
// adapters while traffic runs; a stream on an adapter being unloaded completes and the
// next request for it is NOT_FOUND; on-demand loading; every documented error code.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/loomd_process.h"

namespace loom::e2e {
namespace {

namespace fs = std::filesystem;

class AdminE2eTest : public ::testing::Test {
 protected:
  // <root>/dir_a, <root>/dir_b: adapters; <root>/od1: found on demand by id;
  // <root>/bad: malformed; <outside>/x: valid but outside; <root>/escape -> <outside>/x.
  static void SetUpTestSuite() {
    base_ = new std::string(TempDir("admin"));
    root_ = new std::string(*base_ + "/root");
    outside_ = new std::string(*base_ + "/outside");
    fs::create_directories(*root_);
    for (const auto& [dir, seed] : std::vector<std::pair<std::string, int>>{
             {*root_ + "/dir_a", 1}, {*root_ + "/dir_b", 2}, {*root_ + "/od1", 3},
             {*outside_ + "/x", 4}}) {
      absl::Status s = MakeTestAdapter(dir, 8, seed);
      ASSERT_TRUE(s.ok()) << s;
    }
    fs::create_directories(*root_ + "/bad");
    std::ofstream(*root_ + "/bad/adapter_config.json") << "{\"r\": \"not a number\"";
    std::ofstream(*root_ + "/bad/adapter_model.safetensors") << "garbage";
    fs::create_directory_symlink(*outside_ + "/x", *root_ + "/escape");
  }

  static CommandResult Loomctl(const LoomdProcess& d, std::vector<std::string> args) {
    std::vector<std::string> argv = {Runfile("clients/loomctl/loomctl"), "--addr",
                                     d.admin_target()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  static v1::GenerateRequest Request(const std::string& adapter, int max_tokens) {
    v1::GenerateRequest r;
    r.set_text("The capital of France is");
    r.set_adapter_id(adapter);
    r.set_max_tokens(max_tokens);
    r.set_ignore_eos(true);
    return r;
  }

  static inline std::string* base_ = nullptr;
  static inline std::string* root_ = nullptr;
  static inline std::string* outside_ = nullptr;
};

TEST_F(AdminE2eTest, LoomctlLoadsAndUnloadsWhileTrafficRuns) {
  auto loomd = LoomdProcess::Start({"--adapter_roots=" + *root_});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  LoomdProcess& d = **loomd;
  std::unique_ptr<LoomClient> c = d.Client();

  // Base-model traffic on 3 threads for the whole test; every request must succeed.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> traffic;
  for (int t = 0; t < 3; ++t) {
    traffic.emplace_back([&] {
      while (!stop.load()) {
        absl::StatusOr<GenerateResult> r = c->GenerateAll(Request("", 6));
        (r.ok() ? ok : failed).fetch_add(1);
      }
    });
  }

  CommandResult load = Loomctl(d, {"load", "a", "dir_a"});
  ASSERT_EQ(load.exit_code, 0) << load.output;
  ASSERT_EQ(Loomctl(d, {"load", "b", *root_ + "/dir_b", "--pin"}).exit_code, 0);
  CommandResult list = Loomctl(d, {"list"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("a"), std::string::npos);
  EXPECT_NE(list.output.find("READY"), std::string::npos) << list.output;

  absl::StatusOr<GenerateResult> alone = c->GenerateAll(Request("a", 40));
  ASSERT_TRUE(alone.ok()) << alone.status();

  // A stream on "a" is running when "a" is unloaded: it completes unchanged.
  absl::StatusOr<std::unique_ptr<GenerateStream>> stream = c->StartGenerate(Request("a", 40));
  ASSERT_TRUE(stream.ok());
  v1::GenerateResponse msg;
  std::string text;
  ASSERT_TRUE((*stream)->Next(&msg));
  text += msg.text();
  CommandResult unload = Loomctl(d, {"unload", "a"});
  EXPECT_EQ(unload.exit_code, 0) << unload.output;
  // The next request naming "a" fails at once.
  absl::StatusOr<GenerateResult> after = c->GenerateAll(Request("a", 4));
  EXPECT_EQ(after.status().code(), absl::StatusCode::kNotFound) << after.status();
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while ((*stream)->Next(&msg)) {
    text += msg.text();
    if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish = msg.finish_reason();
  }
  EXPECT_TRUE((*stream)->Finish().ok());
  EXPECT_EQ(finish, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(text, alone->text);
  EXPECT_EQ(Loomctl(d, {"unload", "a"}).exit_code, 1);  // NOT_FOUND now

  // "b" still serves; reload "a" from the GGUF-free PEFT dir again.
  EXPECT_TRUE(c->GenerateAll(Request("b", 4)).ok());
  ASSERT_EQ(Loomctl(d, {"load", "a", "dir_a"}).exit_code, 0);
  absl::StatusOr<GenerateResult> again = c->GenerateAll(Request("a", 40));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->text, alone->text);
  EXPECT_EQ(Loomctl(d, {"status"}).exit_code, 0);

  stop = true;
  for (auto& t : traffic) t.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(d.Stop(), 0) << d.Log();
}

void ExpectCode(const absl::Status& s, absl::StatusCode code, const std::string& in_message = "") {
  EXPECT_EQ(s.code(), code) << s;
  if (!in_message.empty()) EXPECT_NE(s.message().find(in_message), std::string::npos) << s;
}

TEST_F(AdminE2eTest, ErrorCases) {
  const std::string token_file = *base_ + "/token";
  std::ofstream(token_file) << "s3cret\n";
  auto loomd = LoomdProcess::Start({"--adapter_roots=" + *root_, "--max_context=64",
                                    "--admin_token_file=" + token_file});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  LoomdProcess& d = **loomd;
  std::unique_ptr<LoomClient> c = d.Client();
  std::unique_ptr<LoomClient> admin = d.AdminClient("s3cret");

  // Inference errors.
  ExpectCode(c->GenerateAll(Request("nope", 4)).status(), absl::StatusCode::kNotFound, "nope");
  v1::GenerateRequest bad = Request("", 4);
  bad.mutable_sampling()->set_temperature(-1);
  ExpectCode(c->GenerateAll(bad).status(), absl::StatusCode::kInvalidArgument, "temperature");
  bad = Request("", 4);
  bad.mutable_sampling()->set_top_p(1.5f);
  ExpectCode(c->GenerateAll(bad).status(), absl::StatusCode::kInvalidArgument, "top_p");
  ExpectCode(c->GenerateAll(Request("", 100)).status(), absl::StatusCode::kInvalidArgument,
             "64");
  ExpectCode(c->GenerateAll(Request("", 100)).status(), absl::StatusCode::kInvalidArgument,
             "100");
  v1::GenerateRequest none;
  ExpectCode(c->GenerateAll(none).status(), absl::StatusCode::kInvalidArgument, "prompt");
  bad = Request("", -1);
  ExpectCode(c->GenerateAll(bad).status(), absl::StatusCode::kInvalidArgument, "max_tokens");

  // Admin authentication.
  ExpectCode(d.AdminClient()->GetStatus().status(), absl::StatusCode::kUnauthenticated);
  ExpectCode(d.AdminClient("wrong")->ListAdapters().status(),
             absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Loomctl(d, {"status"}).exit_code, 1);
  ASSERT_TRUE(admin->GetStatus().ok());

  // Adapter paths.
  ExpectCode(admin->LoadAdapter("x", *outside_ + "/x", false).status(),
             absl::StatusCode::kPermissionDenied);
  ExpectCode(admin->LoadAdapter("x", "../outside/x", false).status(),
             absl::StatusCode::kPermissionDenied);
  ExpectCode(admin->LoadAdapter("x", "escape", false).status(),
             absl::StatusCode::kPermissionDenied);
  ExpectCode(admin->LoadAdapter("x", "missing", false).status(), absl::StatusCode::kNotFound);
  ExpectCode(admin->LoadAdapter("bad id", "dir_a", false).status(),
             absl::StatusCode::kInvalidArgument);
  absl::StatusOr<v1::AdapterInfo> malformed = admin->LoadAdapter("bad", "bad", false);
  ExpectCode(malformed.status(), absl::StatusCode::kFailedPrecondition, "bad");
  EXPECT_GT(malformed.status().message().size(), 40u) << "the reason is missing";
  ExpectCode(admin->UnloadAdapter("nope").status(), absl::StatusCode::kNotFound);

  // Still serving after all that.
  EXPECT_TRUE(c->GenerateAll(Request("", 4)).ok());
  // On-demand: "od1" is not loaded but <root>/od1 exists.
  absl::StatusOr<GenerateResult> od = c->GenerateAll(Request("od1", 4));
  ASSERT_TRUE(od.ok()) << od.status();
  absl::StatusOr<v1::ListAdaptersResponse> list = admin->ListAdapters();
  ASSERT_TRUE(list.ok());
  bool found = false;
  for (const auto& a : list->adapters()) found |= a.id() == "od1" && a.state() == v1::ADAPTER_STATE_READY;
  EXPECT_TRUE(found);
  absl::StatusOr<v1::ListModelsResponse> models = c->ListModels();
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(models->models(0).kind(), v1::ModelInfo::KIND_BASE);
  EXPECT_EQ(models->models(0).max_context(), 64);
  EXPECT_EQ(d.Stop(), 0) << d.Log();
}

TEST_F(AdminE2eTest, QueueFullAndOnDemandOffFromAConfigFile) {
  const std::string config = *base_ + "/loomd.json";
  std::ofstream(config) << R"({"max_running": 1, "max_queued": 1, "on_demand_adapters": true,
                                "adapter_roots": [")"
                        << *root_ << R"("]})";
  // The flag overrides the config file's on_demand_adapters.
  auto loomd = LoomdProcess::Start({"--config=" + config, "--on_demand_adapters=false"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  LoomdProcess& d = **loomd;
  std::unique_ptr<LoomClient> c = d.Client();
  ExpectCode(c->GenerateAll(Request("od1", 4)).status(), absl::StatusCode::kNotFound);

  auto running = c->StartGenerate(Request("", 4000));
  ASSERT_TRUE(running.ok());
  v1::GenerateResponse msg;
  ASSERT_TRUE((*running)->Next(&msg));  // admitted and decoding
  auto queued = c->StartGenerate(Request("", 4000));
  ASSERT_TRUE(queued.ok());
  // Wait until the second one is in the queue, then a third is refused.
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<v1::GetStatusResponse> st = d.AdminClient()->GetStatus();
    if (st.ok() && st->queued() == 1) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ExpectCode(c->GenerateAll(Request("", 4)).status(), absl::StatusCode::kResourceExhausted);
  (*running)->Cancel();
  (*queued)->Cancel();
  EXPECT_EQ((*running)->Finish().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ((*queued)->Finish().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(d.Stop(), 0) << d.Log();
}

TEST_F(AdminE2eTest, TokenizeAgreesWithGenerate) {
  auto loomd = LoomdProcess::Start({});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  std::unique_ptr<LoomClient> c = (*loomd)->Client();
  // A text prompt and its Tokenize ids as a token_ids prompt generate the same output.
  absl::StatusOr<std::vector<int32_t>> ids = c->TokenizeText("The capital of France is");
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_FALSE(ids->empty());
  v1::GenerateRequest by_ids = Request("", 8);
  by_ids.mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
  absl::StatusOr<GenerateResult> a = c->GenerateAll(Request("", 8));
  absl::StatusOr<GenerateResult> b = c->GenerateAll(by_ids);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->token_ids, b->token_ids);
  EXPECT_EQ(a->usage.prompt_tokens(), static_cast<int>(ids->size()));
  // Chat: the template's markers are in the ids; the pieces concatenate to the text.
  v1::TokenizeRequest chat;
  v1::ChatMessage* m = chat.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("Hi");
  chat.set_return_pieces(true);
  absl::StatusOr<v1::TokenizeResponse> t = c->Tokenize(chat);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string joined;
  for (const std::string& p : t->pieces()) joined += p;
  EXPECT_NE(joined.find("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << joined;
  v1::ChatMessage* bad = chat.mutable_chat()->add_messages();
  bad->set_role("wizard");
  EXPECT_EQ(c->Tokenize(chat).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*loomd)->Stop(), 0) << (*loomd)->Log();
}

TEST_F(AdminE2eTest, AdminOffLoopbackWithoutATokenRefusesToStart) {
  auto loomd = LoomdProcess::Start({"--admin_host=0.0.0.0"}, absl::Seconds(30));
  ASSERT_FALSE(loomd.ok());
  EXPECT_NE(loomd.status().message().find("admin_token_file"), std::string::npos)
      << loomd.status();
}

}  // namespace
}  // namespace loom::e2e
