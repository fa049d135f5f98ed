// LocalFrontend over a FakeWorker (a deterministic greedy-like token source). The
// reference text is computed here independently: FakeWorker::NextToken iterated over the
// prompt, decoded with the tokenizer and cut at the first stop string.
#include "scheduler/frontend/local_frontend.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "models/tokenizer/test_vocab.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/worker/fake_worker.h"

namespace loom {
namespace {

constexpr int32_t kEos = 1;  // "</s>" in the test vocabulary

std::unique_ptr<Tokenizer> TestTokenizer() {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t =
      Tokenizer::Create(testing::ByteLevelVocab({"<s>", "</s>"}, {}));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

FrontendRequest Request(const std::string& prompt, int max_tokens) {
  FrontendRequest r;
  for (unsigned char c : prompt) r.prompt.push_back(2 + c);
  r.max_tokens = max_tokens;
  return r;
}

// The fake model's uninterrupted greedy text for `r`.
std::string ReferenceText(const Tokenizer& tok, const FrontendRequest& r, int32_t eos) {
  std::vector<int32_t> context = r.prompt, out;
  for (int i = 0; i < r.max_tokens; ++i) {
    const int32_t t = FakeWorker::NextToken(r.adapter_id, context, eos);
    context.push_back(t);
    if (t == eos) break;
    out.push_back(t);
  }
  return *tok.Decode(out);
}

struct Sink {
  absl::Mutex mu;
  std::string text;
  std::vector<int32_t> tokens;
  int finals = 0;
  StreamEvent final_event;

  StreamCallback Callback() {
    return [this](const StreamEvent& e) {
      absl::MutexLock l(&mu);
      EXPECT_EQ(finals, 0) << "event after the final one";
      text += e.text;
      tokens.insert(tokens.end(), e.token_ids.begin(), e.token_ids.end());
      if (e.finished) {
        ++finals;
        final_event = e;
      }
    };
  }
  void Wait() {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n > 0; }, &finals));
  }
};

template <typename Pred>
bool WaitFor(Pred pred) {
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  while (!pred()) {
    if (absl::Now() > limit) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

class LocalFrontendTest : public ::testing::Test {
 protected:
  FakeWorker::Options WorkerOptions() {
    FakeWorker::Options o;
    o.eos_id = kEos;
    return o;
  }
  std::unique_ptr<Tokenizer> tok_ = TestTokenizer();
};

TEST_F(LocalFrontendTest, StreamsTheWorkersTokensAsTextWithUsage) {
  FakeWorker worker(WorkerOptions());
  LocalFrontend frontend(tok_.get(), &worker);
  for (const char* prompt : {"abc", "hello there", "x"}) {
    FrontendRequest r = Request(prompt, 40);
    Sink sink;
    ASSERT_TRUE(frontend.Submit(r, sink.Callback()).ok());
    sink.Wait();
    ASSERT_TRUE(sink.final_event.error.ok()) << sink.final_event.error;
    EXPECT_EQ(sink.text, ReferenceText(*tok_, r, kEos)) << prompt;
    EXPECT_EQ(sink.final_event.prompt_tokens, static_cast<int>(r.prompt.size()));
    EXPECT_EQ(sink.final_event.completion_tokens, static_cast<int>(sink.tokens.size()));
    const bool ended_by_eos = !sink.tokens.empty() && sink.tokens.back() == kEos;
    EXPECT_EQ(sink.final_event.finish_reason,
              ended_by_eos ? FinishReason::kStop : FinishReason::kLength);
    // The worker was asked for exactly this request.
    const WorkerRequest placed = worker.started().back();
    EXPECT_EQ(placed.context, r.prompt);
    EXPECT_EQ(placed.max_new_tokens, 40);
    EXPECT_EQ(placed.generated_before, 0);
  }
}

TEST_F(LocalFrontendTest, StopStringEndsTheStreamAndCancelsTheWorkersRequest) {
  FakeWorker::Options o = WorkerOptions();
  o.eos_id = -1;  // only the stop string or max_tokens end it
  FakeWorker worker(o);
  LocalFrontend frontend(tok_.get(), &worker);
  FrontendRequest r = Request("stop test", 400);
  const std::string whole = ReferenceText(*tok_, r, -1);
  // A stop string taken from the middle of the reference text.
  const std::string stop = whole.substr(20, 3);
  r.stop_strings = {stop};
  Sink sink;
  ASSERT_TRUE(frontend.Submit(r, sink.Callback()).ok());
  sink.Wait();
  ASSERT_TRUE(sink.final_event.error.ok());
  EXPECT_EQ(sink.final_event.finish_reason, FinishReason::kStop);
  EXPECT_EQ(sink.text, whole.substr(0, whole.find(stop)));
  // The worker's request was cancelled long before its 400 tokens.
  ASSERT_TRUE(WaitFor([&] { return worker.active() == 0; }));
  EXPECT_LT(sink.final_event.completion_tokens, 400);
}

TEST_F(LocalFrontendTest, CancelAndErrorsReachTheClient) {
  FakeWorker::Options o = WorkerOptions();
  o.stall_at = 3;
  FakeWorker worker(o);
  LocalFrontend frontend(tok_.get(), &worker);
  // Refused at Submit: the text layer's rules and the worker's own refusals.
  FrontendRequest bad = Request("x", 5);
  bad.stop_strings = {""};
  EXPECT_EQ(frontend.Submit(bad, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  FrontendRequest missing = Request("x", 5);
  missing.adapter_id = "missing";
  EXPECT_EQ(frontend.Submit(missing, nullptr).status().code(), absl::StatusCode::kNotFound);
  // Client cancel mid-stream.
  Sink sink;
  absl::StatusOr<uint64_t> id = frontend.Submit(Request("x", 50), sink.Callback());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::MutexLock l(&sink.mu);
    return sink.tokens.size() == 3;
  }));
  frontend.Cancel(*id);
  sink.Wait();
  EXPECT_EQ(sink.final_event.error.code(), absl::StatusCode::kCancelled);
  // A worker that dies ends its streams UNAVAILABLE, after the tokens it sent.
  worker.Unstall();
  Sink lost;
  ASSERT_TRUE(frontend.Submit(Request("y", 1000), lost.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::MutexLock l(&lost.mu);
    return !lost.tokens.empty();
  }));
  worker.Kill();
  lost.Wait();
  EXPECT_EQ(lost.final_event.error.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(lost.finals, 1);
}

}  // namespace
}  // namespace loom
