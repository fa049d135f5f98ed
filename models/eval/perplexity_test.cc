// The strided-window perplexity method on synthetic logits whose distribution is known,
// so the expected perplexity is derived in closed form.
#include "models/eval/perplexity.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(PlanWindowsTest, EveryTokenAfterTheFirstContextScoredOnce) {
  for (int n : {2, 100, 255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 5000}) {
    for (auto [context, stride] : {std::pair{512, 256}, {512, 128}, {64, 63}, {8, 1}, {3, 2}}) {
      std::vector<int> times(n, 0);
      for (const EvalWindow& w : PlanWindows(n, context, stride)) {
        ASSERT_LE(w.end - w.start, context);
        ASSERT_LT(w.start + w.first_scored, w.end) << "a window that scores nothing";
        ASSERT_EQ(w.first_scored, context - stride);
        for (int64_t i = w.start + w.first_scored; i < w.end; ++i) ++times[i];
      }
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(times[i], i >= context - stride ? 1 : 0)
            << "token " << i << " n=" << n << " context=" << context << " stride=" << stride;
      }
    }
  }
}

TEST(PlanWindowsTest, StrideEqualToContextIsNonOverlappingChunks) {
  const std::vector<EvalWindow> w = PlanWindows(10, 4, 4);
  ASSERT_EQ(w.size(), 3u);  // [0,4) [4,8) [8,10)
  EXPECT_EQ(w[2].start, 8);
  EXPECT_EQ(w[2].end, 10);
  for (const EvalWindow& x : w) EXPECT_EQ(x.first_scored, 1);
  EXPECT_TRUE(PlanWindows(10, 4, 5).empty());  // stride > context: refused
  EXPECT_TRUE(PlanWindows(1, 4, 4).empty());   // one token: nothing to predict
}

TEST(TokenNllTest, UniformIsLogVocab) {
  std::vector<float> logits(1000, 7.25f);
  EXPECT_NEAR(TokenNll(logits.data(), 1000, 17), std::log(1000.0), 1e-12);
}

TEST(TokenNllTest, TwoLevelDistribution) {
  // Target logit a, the other V-1 logits 0: p = e^a / (e^a + V - 1).
  const int v = 50;
  const float a = 2.5f;
  std::vector<float> logits(v, 0.0f);
  logits[3] = a;
  const double p = std::exp(2.5) / (std::exp(2.5) + (v - 1));
  EXPECT_NEAR(TokenNll(logits.data(), v, 3), -std::log(p), 1e-12);
  const double q = 1.0 / (std::exp(2.5) + (v - 1));
  EXPECT_NEAR(TokenNll(logits.data(), v, 4), -std::log(q), 1e-12);
}

TEST(TokenNllTest, LargeLogitsDoNotOverflow) {
  std::vector<float> small = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> large = {1001.0f, 1002.0f, 1003.0f, 1004.0f};  // exact in float
  EXPECT_NEAR(TokenNll(large.data(), 4, 2), TokenNll(small.data(), 4, 2), 1e-12);
  EXPECT_TRUE(std::isfinite(TokenNll(large.data(), 4, 0)));
}

// A "model" that predicts next = current + 1 (mod V) with probability p and spreads
// 1 - p uniformly over the other V - 1 tokens. It checks what it is given.
class SuccessorLogits : public WindowLogits {
 public:
  SuccessorLogits(int vocab, double p, int context) : vocab_(vocab), p_(p), context_(context) {}
  int vocab_size() const override { return vocab_; }
  absl::Status Eval(const std::vector<int32_t>& tokens, int first_row, float* logits) override {
    EXPECT_LT(static_cast<int>(tokens.size()), context_);  // the target-only last token is cut
    inputs.push_back(tokens);
    first_rows.push_back(first_row);
    const float hit = static_cast<float>(std::log(p_));
    const float miss = static_cast<float>(std::log((1 - p_) / (vocab_ - 1)));
    for (size_t j = first_row; j < tokens.size(); ++j) {
      float* row = logits + (j - first_row) * vocab_;
      for (int k = 0; k < vocab_; ++k) row[k] = miss;
      row[(tokens[j] + 1) % vocab_] = hit;
    }
    return absl::OkStatus();
  }
  std::vector<std::vector<int32_t>> inputs;
  std::vector<int> first_rows;

 private:
  int vocab_;
  double p_;
  int context_;
};

// t[i+1] = t[i] + 1 when i % 3 != 0, else t[i] + 5 (mod V): a period-3 pattern, so an
// off-by-one between logits rows and targets changes the hit count.
std::vector<int32_t> Pattern(int n, int vocab) {
  std::vector<int32_t> t(n);
  t[0] = 11;
  for (int i = 0; i + 1 < n; ++i) t[i + 1] = (t[i] + (i % 3 != 0 ? 1 : 5)) % vocab;
  return t;
}

TEST(ComputePerplexityOfTokensTest, KnownDistribution) {
  const int vocab = 40, n = 1000;
  const double p = 0.7;
  const std::vector<int32_t> tokens = Pattern(n, vocab);
  for (auto [context, stride] : {std::pair{64, 32}, {64, 16}, {50, 50}, {7, 3}}) {
    SuccessorLogits model(vocab, p, context);
    PerplexityOptions o;
    o.context = context;
    o.stride = stride;
    auto r = ComputePerplexityOfTokens(tokens, model, o);
    ASSERT_TRUE(r.ok()) << r.status();
    // Closed form over the scored targets (PlanWindows' contract, checked above).
    int64_t hits = 0, scored = 0;
    for (const EvalWindow& w : PlanWindows(n, context, stride)) {
      for (int64_t i = w.start + w.first_scored; i < w.end; ++i, ++scored) {
        hits += tokens[i] == (tokens[i - 1] + 1) % vocab;
      }
    }
    const double q = (1 - p) / (vocab - 1);
    const double nll = -(hits * std::log(p) + (scored - hits) * std::log(q)) / scored;
    EXPECT_EQ(r->tokens_scored, scored);
    EXPECT_NEAR(r->nll, nll, 1e-6) << context << "/" << stride;
    EXPECT_NEAR(r->ppl, std::exp(nll), 1e-6 * std::exp(nll));
    // Windows saw exactly their tokens (minus the last), as fresh sequences.
    ASSERT_EQ(model.inputs.size(), r->windows.size());
    int64_t evaluated = 0;
    for (size_t w = 0; w < r->windows.size(); ++w) {
      const WindowPerplexity& win = r->windows[w];
      EXPECT_EQ(model.inputs[w], std::vector<int32_t>(tokens.begin() + win.start,
                                                      tokens.begin() + win.start + win.length - 1));
      evaluated += win.length - 1;
    }
    EXPECT_EQ(r->tokens_evaluated, evaluated);
  }
}

TEST(ComputePerplexityOfTokensTest, UniformModelHasPerplexityVocab) {
  class Uniform : public WindowLogits {
   public:
    int vocab_size() const override { return 321; }
    absl::Status Eval(const std::vector<int32_t>& tokens, int first_row, float* logits) override {
      std::fill(logits, logits + (tokens.size() - first_row) * 321, -3.0f);
      return absl::OkStatus();
    }
  } model;
  std::vector<int32_t> tokens(777);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 37) % 321;
  auto r = ComputePerplexityOfTokens(tokens, model, PerplexityOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->ppl, 321.0, 1e-9);
  EXPECT_EQ(r->tokens_scored, 777 - 256);
  for (const WindowPerplexity& w : r->windows) EXPECT_NEAR(w.ppl(), 321.0, 1e-9);
}

TEST(ComputePerplexityOfTokensTest, MaxTokensAndBos) {
  const int vocab = 40;
  const std::vector<int32_t> tokens = Pattern(500, vocab);
  SuccessorLogits model(vocab, 0.5, 32);
  PerplexityOptions o;
  o.context = 32;
  o.stride = 16;
  o.max_tokens = 100;
  o.add_bos = true;
  o.bos_id = 39;
  auto r = ComputePerplexityOfTokens(tokens, model, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text_tokens, 500);
  EXPECT_EQ(r->tokens_used, 100);
  EXPECT_EQ(r->tokens_scored, 100 - 16);
  EXPECT_EQ(r->token_hash, TokenHash(std::vector<int32_t>(tokens.begin(), tokens.begin() + 100)));
  for (const auto& in : model.inputs) EXPECT_EQ(in[0], 39);
}

TEST(ComputePerplexityOfTokensTest, RejectsBadInput) {
  SuccessorLogits model(40, 0.5, 512);
  const std::vector<int32_t> tokens = Pattern(300, 40);
  PerplexityOptions o;
  o.stride = 600;
  EXPECT_EQ(ComputePerplexityOfTokens(tokens, model, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = PerplexityOptions{};  // 512/256: 300 tokens score 44
  EXPECT_TRUE(ComputePerplexityOfTokens(tokens, model, o).ok());
  o.max_tokens = 256;  // nothing left to score
  EXPECT_EQ(ComputePerplexityOfTokens(tokens, model, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = PerplexityOptions{};
  o.add_bos = true;  // no bos_id
  EXPECT_EQ(ComputePerplexityOfTokens(tokens, model, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> bad = tokens;
  bad[5] = 40;
  EXPECT_EQ(ComputePerplexityOfTokens(bad, model, PerplexityOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenHashTest, DependsOnOrderAndValues) {
  EXPECT_EQ(TokenHash({}), 14695981039346656037ull);  // the FNV-1a-64 offset basis
  EXPECT_NE(TokenHash({1, 2}), TokenHash({2, 1}));
  EXPECT_NE(TokenHash({256}), TokenHash({1}));
}

}  // namespace
}  // namespace loom
