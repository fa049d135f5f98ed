#include "models/eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "models/kv_cache/paged_kv_cache.h"

namespace loom {

double WindowPerplexity::ppl() const {
  return scored > 0 ? std::exp(nll_sum / scored) : std::numeric_limits<double>::quiet_NaN();
}

std::vector<EvalWindow> PlanWindows(int64_t n_tokens, int context, int stride) {
  std::vector<EvalWindow> out;
  if (context < 1 || stride < 1 || stride > context) return out;
  const int32_t first = std::max(1, context - stride);
  for (int64_t s = 0; s + first < n_tokens; s += stride) {
    out.push_back({s, std::min<int64_t>(s + context, n_tokens), first});
  }
  return out;
}

double TokenNll(const float* logits, int vocab, int32_t target) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return -(static_cast<double>(logits[target]) - mx - std::log(sum));
}

uint64_t TokenHash(const std::vector<int32_t>& ids) {
  uint64_t h = 14695981039346656037ull;
  for (int32_t id : ids) {
    const uint32_t u = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b) {
      h ^= (u >> (8 * b)) & 0xFF;
      h *= 1099511628211ull;
    }
  }
  return h;
}

absl::StatusOr<PerplexityResult> ComputePerplexityOfTokens(const std::vector<int32_t>& tokens,
                                                           WindowLogits& source,
                                                           const PerplexityOptions& o) {
  if (o.context < 2 || o.stride < 1 || o.stride > o.context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "perplexity: need context >= 2 and 1 <= stride <= context (got %d, %d)", o.context,
        o.stride));
  }
  if (o.max_tokens < 2) return absl::InvalidArgumentError("perplexity: max_tokens must be >= 2");
  const int vocab = source.vocab_size();
  if (o.add_bos && (o.bos_id < 0 || o.bos_id >= vocab)) {
    return absl::InvalidArgumentError("perplexity: add_bos needs a valid bos_id");
  }
  PerplexityResult r;
  r.text_tokens = static_cast<int64_t>(tokens.size());
  r.tokens_used = std::min<int64_t>(r.text_tokens, o.max_tokens);
  std::vector<int32_t> used(tokens.begin(), tokens.begin() + r.tokens_used);
  for (int32_t t : used) {
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(absl::StrFormat("perplexity: token id %d outside vocabulary", t));
    }
  }
  r.token_hash = TokenHash(used);
  const std::vector<EvalWindow> windows = PlanWindows(r.tokens_used, o.context, o.stride);
  if (windows.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "perplexity: %d tokens leave nothing to score with context %d, stride %d",
        r.tokens_used, o.context, o.stride));
  }
  std::vector<float> logits;
  std::vector<int32_t> input;
  double nll_total = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const EvalWindow& win = windows[w];
    const int n = static_cast<int>(win.end - win.start);
    // The last token is only a target: evaluate tokens [0, n - 1), rows [first - 1, n - 1).
    input.assign(used.begin() + win.start, used.begin() + win.end - 1);
    if (o.add_bos) input[0] = o.bos_id;
    const int first_row = win.first_scored - 1;
    const int rows = n - 1 - first_row;
    logits.resize(static_cast<size_t>(rows) * vocab);
    absl::Status s = source.Eval(input, first_row, logits.data());
    if (!s.ok()) return s;
    WindowPerplexity wp;
    wp.start = win.start;
    wp.length = n;
    wp.scored = rows;
    for (int i = 0; i < rows; ++i) {
      const int32_t target = used[win.start + win.first_scored + i];
      const double nll = TokenNll(logits.data() + static_cast<size_t>(i) * vocab, vocab, target);
      if (!std::isfinite(nll)) {
        return absl::InternalError(absl::StrFormat(
            "perplexity: non-finite log-probability at token %d", win.start + win.first_scored + i));
      }
      wp.nll_sum += nll;
    }
    nll_total += wp.nll_sum;
    r.tokens_scored += rows;
    r.tokens_evaluated += n - 1;
    r.windows.push_back(wp);
    if (o.on_window) {
      o.on_window(static_cast<int>(w + 1), static_cast<int>(windows.size()),
                  std::exp(nll_total / r.tokens_scored));
    }
  }
  r.nll = nll_total / r.tokens_scored;
  r.ppl = std::exp(r.nll);
  return r;
}

namespace {

class LlamaLogits final : public WindowLogits {
 public:
  LlamaLogits(const LlamaModel& model, std::unique_ptr<PagedKvCache> kv,
              const AdapterWeights* adapter)
      : model_(model), kv_(std::move(kv)), adapter_(adapter) {}

  int vocab_size() const override { return model_.config().vocab_size; }

  absl::Status Eval(const std::vector<int32_t>& tokens, int first_row, float* logits) override {
    const int n = static_cast<int>(tokens.size());
    if (first_row < 0 || first_row >= n) {
      return absl::InvalidArgumentError("LlamaWindowLogits: first_row outside the window");
    }
    const int32_t seq = kv_->NewSequence();
    absl::Status s = kv_->Reserve(seq, n);
    // The unscored prefix runs without logits (saves the vocabulary projection), the rest
    // with logits for every token; the forward pass is batch-invariant, so this equals one
    // step over the whole window.
    if (s.ok() && first_row > 0) s = Step(seq, 0, tokens.begin(), tokens.begin() + first_row,
                                          SequenceChunk::Logits::kNone, nullptr);
    if (s.ok()) s = Step(seq, first_row, tokens.begin() + first_row, tokens.end(),
                         SequenceChunk::Logits::kAll, logits);
    kv_->Release(seq);
    return s;
  }

 private:
  absl::Status Step(int32_t seq, int start_pos, std::vector<int32_t>::const_iterator b,
                    std::vector<int32_t>::const_iterator e, SequenceChunk::Logits mode,
                    float* logits) {
    SequenceChunk c;
    c.kv_seq = seq;
    c.start_pos = start_pos;
    c.tokens.assign(b, e);
    c.logits = mode;
    c.adapter = adapter_;
    absl::StatusOr<BatchPlan> plan = BatchPlan::Build({c}, *kv_, model_.config().vocab_size);
    if (!plan.ok()) return plan.status();
    return model_.Forward(*plan, kv_.get(), &ws_, logits);
  }

  const LlamaModel& model_;
  std::unique_ptr<PagedKvCache> kv_;
  const AdapterWeights* adapter_;
  ForwardWorkspace ws_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WindowLogits>> LlamaWindowLogits(const LlamaModel& model,
                                                                int context,
                                                                const AdapterWeights* adapter,
                                                                kernels::KvDtype kv_dtype) {
  if (context < 2) return absl::InvalidArgumentError("LlamaWindowLogits: context must be >= 2");
  if (context > model.config().max_context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "context %d exceeds the model's maximum context %d", context, model.config().max_context));
  }
  if (adapter != nullptr && model.lora_ops() == nullptr) {
    return absl::FailedPreconditionError("an adapter was given but the model has no LoRA kernels");
  }
  KvCacheOptions kvo;
  kvo.budget_bytes = 0;
  kvo.dtype = kv_dtype;
  kvo.n_pages = (context + kvo.page_size - 1) / kvo.page_size + 1;
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv = PagedKvCache::Create(model.config(), kvo);
  if (!kv.ok()) return kv.status();
  return std::unique_ptr<WindowLogits>(new LlamaLogits(model, *std::move(kv), adapter));
}

absl::StatusOr<PerplexityResult> ComputePerplexity(const LlamaModel& model,
                                                   const Tokenizer& tokenizer,
                                                   std::string_view text,
                                                   const PerplexityOptions& options) {
  PerplexityOptions o = options;
  if (o.add_bos) {
    if (tokenizer.bos_id() < 0) {
      return absl::FailedPreconditionError("add_bos: the vocabulary has no BOS token");
    }
    o.bos_id = tokenizer.bos_id();
  }
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, /*add_bos=*/false);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<std::unique_ptr<WindowLogits>> src =
      LlamaWindowLogits(model, o.context, o.adapter, o.kv_dtype);
  if (!src.ok()) return src.status();
  return ComputePerplexityOfTokens(*ids, **src, o);
}

}  // namespace loom
