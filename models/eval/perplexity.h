// Perplexity of a causal LM over a token stream, with a strided window.
//
// The method (implemented identically by scripts/llamacpp_ppl.py for llama.cpp, so the two
// numbers are comparable):
//   * The text is tokenized once (no BOS unless add_bos) and cut to its first max_tokens
//     tokens: t[0..N).
//   * Window w covers tokens [w*stride, min(w*stride + context, N)), evaluated as a fresh
//     sequence (positions from 0, empty KV cache). Windows are taken while a window has at
//     least one scored token.
//   * In a window, the token at in-window position p is SCORED when
//     p >= context - stride (and p >= 1): its log-probability comes from the logits at
//     position p - 1. So every token t[i] with i >= context - stride is scored exactly once,
//     always with at least context - stride tokens of context (256 for the defaults
//     512/256), and t[0 .. context - stride) are context only. stride == context gives
//     plain non-overlapping chunks (every token but each chunk's first is scored).
//   * add_bos: the window's first input token is replaced by BOS (as llama.cpp's
//     `perplexity` tool does); it is never a scored token unless stride == context.
//   * log p = logit[target] - logsumexp(logits), accumulated in double;
//     nll = -(1/n) sum log p; ppl = exp(nll).
// This differs from llama.cpp's `llama-perplexity` binary, which uses non-overlapping
// chunks of n_ctx and scores in-chunk positions n_ctx/2+1 .. n_ctx-1 (half the text).
#ifndef LOOM_MODELS_EVAL_PERPLEXITY_H_
#define LOOM_MODELS_EVAL_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "models/llama/adapter_weights.h"
#include "models/llama/llama_model.h"
#include "models/tokenizer/tokenizer.h"

namespace loom {

struct PerplexityOptions {
  int context = 512;          // window length in tokens
  int stride = 256;           // window step; 1 <= stride <= context
  int64_t max_tokens = 50000; // tokens of the text used (after tokenization); >= 2
  // LoRA for every window; nullptr = base model. Used by ComputePerplexity (a WindowLogits
  // given to ComputePerplexityOfTokens carries its own).
  const AdapterWeights* adapter = nullptr;
  // Element type of the KV cache the windows run with (FP16, INT8 or INT4-asymmetric).
  kernels::KvDtype kv_dtype = kernels::KvDtype::kF16;
  bool add_bos = false;       // BOS replaces each window's first input token
  int32_t bos_id = -1;        // the BOS id (ComputePerplexity fills it from the tokenizer)
  // Called after each window (optional): windows done, total windows, running ppl.
  std::function<void(int, int, double)> on_window;
};

// One window's share of the result.
struct WindowPerplexity {
  int64_t start = 0;      // first token of the window (index into the capped stream)
  int32_t length = 0;     // tokens evaluated
  int32_t scored = 0;     // tokens scored
  double nll_sum = 0;     // -sum log p over the scored tokens
  double ppl() const;     // exp(nll_sum / scored)
};

struct PerplexityResult {
  double ppl = 0;              // exp(nll)
  double nll = 0;              // mean negative log-likelihood per scored token (nats)
  int64_t text_tokens = 0;     // tokens of the whole text
  int64_t tokens_used = 0;     // min(text_tokens, max_tokens)
  int64_t tokens_scored = 0;
  int64_t tokens_evaluated = 0;  // sum of window lengths (forward-pass tokens)
  uint64_t token_hash = 0;     // FNV-1a-64 of the used ids (little-endian int32 bytes)
  std::vector<WindowPerplexity> windows;
};

// A window of the method above: tokens [start, end), scored from in-window position
// first_scored (targets t[start + first_scored .. end)).
struct EvalWindow {
  int64_t start = 0;
  int64_t end = 0;
  int32_t first_scored = 0;
};

// The windows for n_tokens tokens (empty when none would be scored).
// REQUIRES: 1 <= stride <= context.
std::vector<EvalWindow> PlanWindows(int64_t n_tokens, int context, int stride);

// -log softmax(logits)[target] over `vocab` floats, computed in double.
double TokenNll(const float* logits, int vocab, int32_t target);

// FNV-1a-64 over the ids' little-endian int32 bytes (scripts/llamacpp_ppl.py prints the
// same, so tokenizations can be compared).
uint64_t TokenHash(const std::vector<int32_t>& ids);

// Where logits come from: for `tokens` (one window, positions 0..n-1 of a fresh sequence),
// writes logits rows for positions [first_row, n) to `logits` ([n - first_row, vocab]).
class WindowLogits {
 public:
  virtual ~WindowLogits() = default;
  virtual int vocab_size() const = 0;
  virtual absl::Status Eval(const std::vector<int32_t>& tokens, int first_row,
                            float* logits) = 0;
};

// The method over given tokens (already capped by the caller or not: max_tokens applies).
// InvalidArgument on bad options or fewer than context - stride + 1 tokens (nothing to
// score).
absl::StatusOr<PerplexityResult> ComputePerplexityOfTokens(const std::vector<int32_t>& tokens,
                                                           WindowLogits& source,
                                                           const PerplexityOptions& options);

// The Llama model as a WindowLogits (one sequence per window, its own small KV cache; the
// window's prefix runs without logits, the scored part with all logits).
absl::StatusOr<std::unique_ptr<WindowLogits>> LlamaWindowLogits(
    const LlamaModel& model, int context, const AdapterWeights* adapter,
    kernels::KvDtype kv_dtype = kernels::KvDtype::kF16);

// Tokenizes `text` (Encode: untrusted text, no special tokens; no BOS) and runs the method.
// FailedPrecondition when an adapter is given but the model has no LoRA kernels, or add_bos
// without a BOS token.
absl::StatusOr<PerplexityResult> ComputePerplexity(const LlamaModel& model,
                                                   const Tokenizer& tokenizer,
                                                   std::string_view text,
                                                   const PerplexityOptions& options);

}  // namespace loom

#endif  // LOOM_MODELS_EVAL_PERPLEXITY_H_
