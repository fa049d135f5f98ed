// End-to-end generation through the real loomd: concurrent mixed-adapter streams equal
// the same requests run alone; preemption under a tiny KV budget changes nothing;
// cancelling frees KV pages (GetStatus and /metrics); SIGTERM lets a stream finish and
// exits 0; the Python client streams.
#include <signal.h>

#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/loomd_process.h"

namespace loom::e2e {
namespace {

constexpr int kAdapters = 8;
constexpr int kStreams = 32;
constexpr int kMaxTokens = 16;

const char* kPrompts[] = {
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
};

// Adapters t0..t7 in <root>/dir_t<i> (names differ from the ids, so on-demand loading
// cannot find them by id).
class GenerateE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(TempDir("adapters"));
    for (int i = 0; i < kAdapters; ++i) {
      absl::Status s = MakeTestAdapter(absl::StrCat(*root_, "/dir_t", i), i % 2 ? 16 : 8,
                                       100 + i);
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  static std::vector<std::string> Flags(std::vector<std::string> extra = {}) {
    std::vector<std::string> preload;
    for (int i = 0; i < kAdapters; ++i) preload.push_back(absl::StrCat("t", i, "=dir_t", i));
    std::vector<std::string> f = {"--adapter_roots=" + *root_,
                                  "--preload=" + absl::StrJoin(preload, ",")};
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  }
  static v1::GenerateRequest Request(int i, int max_tokens = kMaxTokens) {
    v1::GenerateRequest r;
    r.set_text(kPrompts[i % 4]);
    r.set_adapter_id(i % (kAdapters + 1) == kAdapters ? "" : absl::StrCat("t", i % (kAdapters + 1)));
    r.set_max_tokens(max_tokens);
    r.set_ignore_eos(true);
    return r;
  }
  static std::vector<GenerateResult> RunAlone(LoomClient* c, int n, int max_tokens) {
    std::vector<GenerateResult> out;
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<GenerateResult> r = c->GenerateAll(Request(i, max_tokens));
      EXPECT_TRUE(r.ok()) << r.status();
      out.push_back(r.ok() ? *r : GenerateResult());
    }
    return out;
  }
  static std::vector<absl::StatusOr<GenerateResult>> RunConcurrently(LoomClient* c, int n,
                                                                     int max_tokens) {
    std::vector<absl::StatusOr<GenerateResult>> out(n, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] { out[i] = c->GenerateAll(Request(i, max_tokens)); });
    }
    for (auto& t : threads) t.join();
    return out;
  }
  static void ExpectSame(const std::vector<GenerateResult>& alone,
                         const std::vector<absl::StatusOr<GenerateResult>>& together,
                         int max_tokens) {
    for (size_t i = 0; i < alone.size(); ++i) {
      ASSERT_TRUE(together[i].ok()) << i << ": " << together[i].status();
      EXPECT_EQ(together[i]->token_ids, alone[i].token_ids) << "stream " << i;
      EXPECT_EQ(together[i]->text, alone[i].text) << "stream " << i;
      EXPECT_EQ(together[i]->finish_reason, v1::FINISH_REASON_LENGTH);
      EXPECT_EQ(together[i]->usage.completion_tokens(), max_tokens);
      EXPECT_EQ(alone[i].token_ids.size(), static_cast<size_t>(max_tokens));
    }
  }
  static inline std::string* root_ = nullptr;
};

TEST_F(GenerateE2eTest, ThirtyTwoStreamsOverEightAdaptersEqualRunningAlone) {
  auto loomd = LoomdProcess::Start(Flags());
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  std::unique_ptr<LoomClient> c = (*loomd)->Client();
  absl::StatusOr<v1::ListAdaptersResponse> list = (*loomd)->AdminClient()->ListAdapters();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->adapters_size(), kAdapters);  // the preload list
  for (const v1::AdapterInfo& a : list->adapters()) {
    EXPECT_EQ(a.state(), v1::ADAPTER_STATE_READY) << a.id() << ": " << a.error();
  }

  const std::vector<GenerateResult> alone = RunAlone(c.get(), kStreams, kMaxTokens);
  // The adapters matter: some adapter's text differs from the base's for the same prompt.
  int differing = 0;
  for (int i = 0; i < kStreams; ++i) {
    for (int j = 0; j < kStreams; ++j) {
      if (Request(i).adapter_id().empty() && !Request(j).adapter_id().empty() &&
          i % 4 == j % 4 && alone[i].token_ids != alone[j].token_ids) {
        ++differing;
      }
    }
  }
  EXPECT_GT(differing, 0);
  ExpectSame(alone, RunConcurrently(c.get(), kStreams, kMaxTokens), kMaxTokens);
  EXPECT_EQ((*loomd)->Stop(), 0) << (*loomd)->Log();
}

TEST_F(GenerateE2eTest, PreemptionUnderATinyKvBudgetKeepsEveryStreamExact) {
  // 12 pages of 16 tokens: each request needs ~2 pages (prompt <= 11 tokens + 24), so 12
  // concurrent requests cannot all hold their pages and the newest are preempted.
  constexpr int kN = 12, kTokens = 24;
  auto probe = LoomdProcess::Start(Flags());
  ASSERT_TRUE(probe.ok()) << probe.status();
  const std::vector<GenerateResult> alone = RunAlone((*probe)->Client().get(), kN, kTokens);
  EXPECT_EQ((*probe)->Stop(), 0);

  // K+V bytes per token of SmolLM2-135M: 30 layers * 2 * 3 kv heads * 64 * 2 bytes.
  const int64_t bytes_per_token = 30 * 2 * 3 * 64 * 2;
  auto loomd = LoomdProcess::Start(
      Flags({absl::StrCat("--kv_bytes=", 12 * 16 * bytes_per_token)}));
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  ExpectSame(alone, RunConcurrently((*loomd)->Client().get(), kN, kTokens), kTokens);
  absl::StatusOr<v1::GetStatusResponse> st = (*loomd)->AdminClient()->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->kv_pages_used() + st->kv_pages_free(), 12);
  EXPECT_GT(st->workers(0).preemptions(), 0) << "the KV budget did not force preemption";
  EXPECT_EQ(st->kv_pages_used(), 0);
  EXPECT_EQ((*loomd)->Stop(), 0) << (*loomd)->Log();
}

// The same preemption run over an INT8 KV cache: 12 pages now cost 66/128 of the FP16
// bytes, GetStatus names the dtype, and every stream still equals its run alone on the
// same (INT8) daemon: quantized rows are written and read deterministically, so
// recomputation after preemption gives back the same cache.
TEST_F(GenerateE2eTest, Int8KvCachePreemptionKeepsEveryStreamExact) {
  constexpr int kN = 12, kTokens = 24;
  auto probe = LoomdProcess::Start(Flags({"--kv_cache_dtype=int8"}));
  ASSERT_TRUE(probe.ok()) << probe.status();
  const std::vector<GenerateResult> alone = RunAlone((*probe)->Client().get(), kN, kTokens);
  EXPECT_EQ((*probe)->Stop(), 0);

  // 30 layers * (K, V) * 3 kv heads * (2-byte scale + 64 int8).
  const int64_t bytes_per_token = 30 * 2 * 3 * (2 + 64);
  auto loomd = LoomdProcess::Start(Flags({"--kv_cache_dtype=int8",
                                          absl::StrCat("--kv_bytes=", 12 * 16 * bytes_per_token)}));
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  ExpectSame(alone, RunConcurrently((*loomd)->Client().get(), kN, kTokens), kTokens);
  absl::StatusOr<v1::GetStatusResponse> st = (*loomd)->AdminClient()->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->kv_pages_used() + st->kv_pages_free(), 12);
  EXPECT_EQ(st->workers(0).kv_cache_dtype(), "int8");
  EXPECT_GT(st->workers(0).preemptions(), 0) << "the KV budget did not force preemption";
  EXPECT_EQ((*loomd)->Stop(), 0) << (*loomd)->Log();

  // An unknown dtype is refused at start with a message naming the flag.
  auto bad = LoomdProcess::Start(Flags({"--kv_cache_dtype=fp8"}), absl::Seconds(30));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("kv_cache_dtype"), std::string::npos)
      << bad.status();
}

TEST_F(GenerateE2eTest, CancellingMidStreamFreesKvPages) {
  auto loomd = LoomdProcess::Start(Flags());
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  std::unique_ptr<LoomClient> c = (*loomd)->Client();
  std::unique_ptr<LoomClient> admin = (*loomd)->AdminClient();
  v1::GenerateRequest req = Request(0, 4000);
  absl::StatusOr<std::unique_ptr<GenerateStream>> stream = c->StartGenerate(req);
  ASSERT_TRUE(stream.ok()) << stream.status();
  v1::GenerateResponse msg;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*stream)->Next(&msg));

  absl::StatusOr<v1::GetStatusResponse> busy = admin->GetStatus();
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_EQ(busy->running(), 1);
  EXPECT_GT(busy->kv_pages_used(), 0);
  absl::StatusOr<HttpResponse> m = HttpGet((*loomd)->metrics_port(), "/metrics");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(*MetricValue(m->body, "loom_kv_cache_pages_used"), 0);

  (*stream)->Cancel();
  while ((*stream)->Next(&msg)) {
  }
  EXPECT_EQ((*stream)->Finish().code(), absl::StatusCode::kCancelled);
  // Pages return at the engine's next step; poll (no timing assertion, just a bound).
  int64_t used = -1;
  double metric_used = -1;
  for (int i = 0; i < 200 && (used != 0 || metric_used != 0); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    absl::StatusOr<v1::GetStatusResponse> st = admin->GetStatus();
    ASSERT_TRUE(st.ok());
    used = st->kv_pages_used();
    m = HttpGet((*loomd)->metrics_port(), "/metrics");
    ASSERT_TRUE(m.ok());
    metric_used = MetricValue(m->body, "loom_kv_cache_pages_used").value_or(-1);
  }
  EXPECT_EQ(used, 0);
  EXPECT_EQ(metric_used, 0);
  absl::StatusOr<v1::GetStatusResponse> idle = admin->GetStatus();
  EXPECT_EQ(idle->running(), 0);
  EXPECT_EQ(idle->kv_pages_free(), busy->kv_pages_used() + busy->kv_pages_free());
  EXPECT_EQ((*loomd)->Stop(), 0) << (*loomd)->Log();
}

TEST_F(GenerateE2eTest, SigtermLetsAnInFlightStreamFinishAndExitsZero) {
  auto loomd = LoomdProcess::Start(Flags({"--shutdown_grace=60s"}));
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  std::unique_ptr<LoomClient> c = (*loomd)->Client();
  const GenerateResult alone = *c->GenerateAll(Request(1, 48));
  absl::StatusOr<std::unique_ptr<GenerateStream>> stream = c->StartGenerate(Request(1, 48));
  ASSERT_TRUE(stream.ok());
  v1::GenerateResponse msg;
  GenerateResult got;
  ASSERT_TRUE((*stream)->Next(&msg));
  got.text += msg.text();
  (*loomd)->Signal(SIGTERM);
  while ((*stream)->Next(&msg)) {
    got.text += msg.text();
    if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) got.finish_reason = msg.finish_reason();
  }
  EXPECT_TRUE((*stream)->Finish().ok());
  EXPECT_EQ(got.text, alone.text);
  EXPECT_EQ(got.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ((*loomd)->Wait(absl::Seconds(60)), 0) << (*loomd)->Log();
}

TEST_F(GenerateE2eTest, PythonClientStreams) {
  if (RunCommand({"/usr/bin/python3", "-c", "import grpc, google.protobuf"}).exit_code != 0) {
    GTEST_SKIP() << "python3-grpcio / python3-protobuf are not installed";
  }
  // clients/python has no Bazel target exporting its files; find the source tree through
  // the runfile symlink of a proto file and copy the package from there.
  const std::filesystem::path proto =
      std::filesystem::canonical(Runfile("proto/loom/v1/inference.proto"));
  const std::filesystem::path src_root = proto.parent_path().parent_path().parent_path().parent_path();
  const std::string py = TempDir("python");
  std::filesystem::create_directories(py + "/clients");
  std::filesystem::copy(src_root / "clients/python", py + "/clients/python",
                        std::filesystem::copy_options::recursive);
  std::filesystem::create_directories(py + "/proto/loom/v1");
  for (const char* f : {"inference.proto", "admin.proto"}) {
    std::filesystem::copy(Runfile(absl::StrCat("proto/loom/v1/", f)),
                          absl::StrCat(py, "/proto/loom/v1/", f));
  }
  CommandResult gen = RunCommand({"/bin/sh", py + "/clients/python/gen_stubs.sh"});
  ASSERT_EQ(gen.exit_code, 0) << gen.output;

  auto loomd = LoomdProcess::Start(Flags());
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  v1::GenerateRequest req = Request(3, kMaxTokens);
  req.set_ignore_eos(false);
  const GenerateResult alone = *(*loomd)->Client()->GenerateAll(req);
  CommandResult r = RunCommand(
      {"/usr/bin/python3", py + "/clients/python/examples/stream.py", "--addr",
       (*loomd)->target(), "--adapter", req.adapter_id(), "--max-tokens",
       absl::StrCat(kMaxTokens), "--raw", kPrompts[3]},
      {"PYTHONPATH=" + py + "/clients/python"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(alone.text), std::string::npos) << r.output << "\nvs\n" << alone.text;
  EXPECT_NE(r.output.find("[finish="), std::string::npos) << r.output;
  EXPECT_EQ((*loomd)->Stop(), 0) << (*loomd)->Log();
}

}  // namespace
}  // namespace loom::e2e
