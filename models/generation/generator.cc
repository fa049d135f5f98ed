#include "models/generation/generator.h"

#include <chrono>
#include <optional>

#include "absl/strings/str_format.h"
#include "models/sampling/sampler.h"
#include "models/tokenizer/incremental_detokenizer.h"

namespace loom {
namespace {

// Per-request state during Run().
struct Active {
  int index = 0;
  int32_t kv_seq = -1;
  int32_t in_cache = 0;            // tokens whose K/V are in the cache
  std::vector<int32_t> history;    // prompt + generated
  int32_t prompt_len = 0;
  std::optional<int32_t> pending;  // sampled, not yet fed
  std::optional<Sampler> sampler;
  std::optional<StopChecker> stop;
  std::unique_ptr<IncrementalDetokenizer> detok;
  bool admitted = false;
  bool done = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(const LlamaModel* model,
                                                              const Tokenizer* tokenizer,
                                                              const GeneratorOptions& options) {
  if (model == nullptr || tokenizer == nullptr) {
    return absl::InvalidArgumentError("Generator: model and tokenizer are required");
  }
  if (options.max_step_tokens < 1) {
    return absl::InvalidArgumentError("Generator: max_step_tokens must be >= 1");
  }
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv =
      PagedKvCache::Create(model->config(), options.kv);
  if (!kv.ok()) return kv.status();
  return std::unique_ptr<Generator>(new Generator(model, tokenizer, options, *std::move(kv)));
}

absl::StatusOr<std::vector<GenerationResult>> Generator::Run(
    const std::vector<GenerationRequest>& requests, const TextCallback& on_text,
    GenerationTiming* timing) {
  const LlamaConfig& cfg = model_->config();
  std::vector<Active> act(requests.size());
  std::vector<GenerationResult> results(requests.size());
  const int page = kv_->page_size();
  const int total_pages = kv_->allocator().total_pages();

  // Validate everything before doing any work.
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& r = requests[i];
    if (r.prompt.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("request %d: empty prompt", i));
    }
    if (r.max_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request %d: max_tokens %d must be >= 1", i, r.max_tokens));
    }
    const int64_t need = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
    if (need > cfg.max_context) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: prompt (%d tokens) + max_tokens (%d) = %d exceeds the maximum context "
          "of %d tokens",
          i, r.prompt.size(), r.max_tokens, need, cfg.max_context));
    }
    if ((need + page - 1) / page > total_pages) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "request %d: needs %d KV tokens but the cache holds %d", i, need,
          int64_t{total_pages} * page));
    }
    for (int32_t t : r.prompt) {
      if (t < 0 || t >= cfg.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("request %d: token id %d outside vocabulary", i, t));
      }
    }
    if (r.adapter != nullptr && model_->lora_ops() == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrFormat("request %d names an adapter but the model has no LoRA kernels", i));
    }
    absl::StatusOr<Sampler> s = Sampler::Create(r.sampling);
    if (!s.ok()) return s.status();
    std::vector<int32_t> stop_ids;
    if (r.stop_at_end_of_generation) stop_ids = tokenizer_->end_of_generation_ids();
    absl::StatusOr<StopChecker> stop =
        StopChecker::Create(r.stop_strings, std::move(stop_ids), r.max_tokens);
    if (!stop.ok()) return stop.status();
    Active& a = act[i];
    a.index = static_cast<int>(i);
    a.history = r.prompt;
    a.prompt_len = static_cast<int32_t>(r.prompt.size());
    a.sampler.emplace(*std::move(s));
    a.stop.emplace(*std::move(stop));
    a.detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_);
    results[i].prompt_tokens = a.prompt_len;
  }

  auto finish = [&](Active& a) {
    a.done = true;
    kv_->Release(a.kv_seq);
    a.kv_seq = -1;
  };
  auto emit = [&](Active& a, const std::string& text) {
    if (text.empty()) return;
    results[a.index].text += text;
    if (on_text) on_text(a.index, text);
  };

  size_t n_done = 0;
  std::vector<SequenceChunk> chunks;
  std::vector<Active*> chunk_owner;
  while (n_done < act.size()) {
    // Admit waiting requests in order while their whole budget fits in the cache.
    for (Active& a : act) {
      if (a.admitted || a.done) continue;
      const int32_t need = a.prompt_len + requests[a.index].max_tokens;
      const int32_t seq = kv_->NewSequence();
      if (!kv_->Reserve(seq, need).ok()) {
        kv_->Release(seq);
        break;  // FCFS: later requests wait too
      }
      a.kv_seq = seq;
      a.admitted = true;
    }
    chunks.clear();
    chunk_owner.clear();
    int budget = options_.max_step_tokens;
    bool has_prefill = false;
    for (Active& a : act) {  // decode tokens first: they never wait
      if (!a.admitted || a.done || !a.pending) continue;
      SequenceChunk c;
      c.kv_seq = a.kv_seq;
      c.start_pos = a.in_cache;
      c.tokens = {*a.pending};
      c.logits = SequenceChunk::Logits::kLast;
      c.adapter = requests[a.index].adapter;
      chunks.push_back(std::move(c));
      chunk_owner.push_back(&a);
      --budget;
    }
    for (Active& a : act) {  // then prefill chunks under the remaining budget
      if (budget <= 0) break;
      if (!a.admitted || a.done || a.pending || a.in_cache >= a.prompt_len) continue;
      const int32_t n = std::min(budget, a.prompt_len - a.in_cache);
      SequenceChunk c;
      c.kv_seq = a.kv_seq;
      c.start_pos = a.in_cache;
      c.tokens.assign(a.history.begin() + a.in_cache, a.history.begin() + a.in_cache + n);
      c.logits = a.in_cache + n == a.prompt_len ? SequenceChunk::Logits::kLast
                                                : SequenceChunk::Logits::kNone;
      c.adapter = requests[a.index].adapter;
      chunks.push_back(std::move(c));
      chunk_owner.push_back(&a);
      budget -= n;
      has_prefill = true;
    }
    if (chunks.empty()) {
      return absl::InternalError("generator: no runnable sequence (KV cache deadlock)");
    }
    absl::StatusOr<BatchPlan> plan = BatchPlan::Build(chunks, *kv_, cfg.vocab_size);
    if (!plan.ok()) return plan.status();
    const size_t rows = plan->logit_tokens().size();
    if (logits_.size() < rows * cfg.vocab_size) logits_.resize(rows * cfg.vocab_size);
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = model_->Forward(*plan, kv_.get(), &ws_, logits_.data()); !s.ok()) {
      return s;
    }
    for (size_t c = 0; c < chunks.size(); ++c) {
      Active& a = *chunk_owner[c];
      a.in_cache += static_cast<int32_t>(chunks[c].tokens.size());
      if (a.pending) {
        a.history.push_back(*a.pending);
        a.pending.reset();
      }
      const int32_t r0 = plan->logit_rows(c).first;
      if (plan->logit_rows(c).second == r0) continue;  // mid-prompt chunk
      const absl::Span<const float> row(logits_.data() + static_cast<size_t>(r0) * cfg.vocab_size,
                                        cfg.vocab_size);
      const int32_t tok = a.sampler->Sample(row, a.history);
      results[a.index].tokens.push_back(tok);
      absl::StatusOr<std::string> piece = a.detok->Push(tok);
      if (!piece.ok()) return piece.status();
      const StopChecker::Step st = a.stop->Update(tok, *piece);
      emit(a, st.text);
      if (st.finished) {
        if (st.reason != FinishReason::kStop) emit(a, a.detok->Flush());
        results[a.index].finish_reason = st.reason;
        finish(a);
        ++n_done;
      } else {
        a.pending = tok;
      }
    }
    const double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (timing != nullptr) {
      (has_prefill ? timing->prefill_seconds : timing->decode_seconds) += dt;
    }
  }
  if (timing != nullptr) {
    for (const GenerationResult& r : results) {
      timing->prompt_tokens += r.prompt_tokens;
      timing->generated_tokens += static_cast<int64_t>(r.tokens.size());
    }
  }
  return results;
}

}  // namespace loom
