#include "scheduler/engine/engine.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_format.h"
#include "models/sampling/sampler.h"
#include "models/tokenizer/incremental_detokenizer.h"
#include "scheduler/engine/lora_adapter_weights.h"

namespace loom {

struct Engine::Sequence {
  uint64_t id = 0;
  EngineRequest req;
  StreamCallback callback;
  AdapterLease lease;
  std::unique_ptr<LoraAdapterWeights> adapter;  // view over lease; null = base model
  int32_t kv_seq = -1;
  int32_t in_cache = 0;           // tokens with K/V in the cache
  std::vector<int32_t> history;   // prompt + generated tokens already fed or to prefill
  int32_t prompt_len = 0;
  std::optional<int32_t> pending; // sampled and streamed, not yet fed
  std::optional<Sampler> sampler;
  std::optional<StopChecker> stop;
  std::unique_ptr<IncrementalDetokenizer> detok;
  absl::Time arrival;
  absl::Time last_token_time;
  int completion_tokens = 0;
  bool cancelled = false;
  bool done = false;
};

namespace {

int ContextOf(const LlamaModel& model, const EngineOptions& o) {
  const int m = model.config().max_context;
  return o.max_context > 0 ? std::min(m, o.max_context) : m;
}

}  // namespace

Engine::Engine(const LlamaModel* model, const Tokenizer* tokenizer, AdapterStore* adapters,
               EngineObserver* observer, EngineOptions options,
               std::unique_ptr<PagedKvCache> kv, int max_context)
    : model_(model),
      tokenizer_(tokenizer),
      adapters_(adapters),
      observer_(observer),
      options_(std::move(options)),
      max_context_(max_context),
      kv_(std::move(kv)) {
  absl::MutexLock l(&mu_);
  stats_.kv_pages_total = kv_->allocator().total_pages();
  stats_.kv_dtype = kv_->layout().dtype;
  stats_.max_context = max_context_;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const LlamaModel* model,
                                                       const Tokenizer* tokenizer,
                                                       AdapterStore* adapters,
                                                       EngineObserver* observer,
                                                       const EngineOptions& options) {
  if (model == nullptr || tokenizer == nullptr) {
    return absl::InvalidArgumentError("Engine: model and tokenizer are required");
  }
  if (options.max_batch_tokens < 1 || options.max_running < 1 || options.max_queued < 0) {
    return absl::InvalidArgumentError(
        "Engine: max_batch_tokens and max_running must be >= 1, max_queued >= 0");
  }
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv =
      PagedKvCache::Create(model->config(), options.kv);
  if (!kv.ok()) return kv.status();
  std::unique_ptr<Engine> e(new Engine(model, tokenizer, adapters, observer, options,
                                       *std::move(kv), ContextOf(*model, options)));
  e->thread_ = std::thread([raw = e.get()] { raw->Loop(); });
  return e;
}

Engine::~Engine() {
  Shutdown(absl::ZeroDuration());
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<uint64_t> Engine::Submit(EngineRequest request, StreamCallback callback) {
  const LlamaConfig& cfg = model_->config();
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= cfg.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "prompt token id %d is outside the vocabulary [0, %d)", t, cfg.vocab_size));
    }
  }
  if (request.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_tokens = %d must be >= 1", request.max_tokens));
  }
  if (request.top_logprobs < 0 || request.top_logprobs > 20) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_logprobs = %d must be in [0, 20]", request.top_logprobs));
  }
  const int64_t need = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  if (need > max_context_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prompt (%d tokens) + max_tokens (%d) = %d exceeds the maximum context of %d tokens",
        request.prompt.size(), request.max_tokens, need, max_context_));
  }
  const int64_t pages_needed = (need + kv_->page_size() - 1) / kv_->page_size();
  if (pages_needed > kv_->allocator().total_pages()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "prompt + max_tokens = %d tokens exceeds the KV cache capacity of %d tokens", need,
        int64_t{kv_->allocator().total_pages()} * kv_->page_size()));
  }
  if (absl::Status s = request.sampling.Validate(); !s.ok()) return s;
  auto seq = std::make_unique<Sequence>();
  absl::StatusOr<Sampler> sampler = Sampler::Create(request.sampling);
  if (!sampler.ok()) return sampler.status();
  std::vector<int32_t> stop_ids;
  if (request.stop_at_end_of_generation) stop_ids = tokenizer_->end_of_generation_ids();
  absl::StatusOr<StopChecker> stop =
      StopChecker::Create(request.stop_strings, std::move(stop_ids), request.max_tokens);
  if (!stop.ok()) return stop.status();
  if (!request.adapter_id.empty()) {
    if (adapters_ == nullptr) {
      return absl::NotFoundError(
          absl::StrFormat("adapter '%s' not found: no adapters are configured",
                          request.adapter_id));
    }
    // Lease now: the adapter cannot be unloaded or evicted under this request.
    absl::StatusOr<AdapterLease> lease = adapters_->Acquire(request.adapter_id);
    if (!lease.ok()) return lease.status();
    seq->lease = *std::move(lease);
    seq->adapter = std::make_unique<LoraAdapterWeights>(seq->lease.get());
  }
  seq->sampler.emplace(*std::move(sampler));
  seq->stop.emplace(*std::move(stop));
  seq->detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_);
  seq->history = request.prompt;
  seq->prompt_len = static_cast<int32_t>(request.prompt.size());
  seq->req = std::move(request);
  seq->callback = std::move(callback);
  seq->arrival = absl::Now();

  absl::MutexLock l(&mu_);
  if (stopping_) return absl::UnavailableError("server is shutting down");
  if (queued_ >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("request queue is full (%d waiting)", queued_));
  }
  seq->id = next_id_++;
  const uint64_t id = seq->id;
  ++queued_;
  inbox_.push_back(std::move(seq));
  return id;
}

void Engine::Cancel(uint64_t id) {
  absl::MutexLock l(&mu_);
  cancels_.push_back(id);
}

EngineStats Engine::GetStats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

void Engine::Shutdown(absl::Duration grace) {
  absl::MutexLock l(&mu_);
  stopping_ = true;
  hard_stop_ = std::min(hard_stop_, absl::Now() + grace);
  mu_.Await(absl::Condition(&stopped_));
}

void Engine::TakeInbox() {
  std::vector<std::unique_ptr<Sequence>> in;
  std::vector<uint64_t> cancels;
  bool hard_stop = false;
  {
    absl::MutexLock l(&mu_);
    in.swap(inbox_);
    cancels.swap(cancels_);
    hard_stop = stopping_ && absl::Now() >= hard_stop_;
  }
  for (auto& s : in) waiting_.push_back(std::move(s));
  const absl::Time now = absl::Now();
  auto check = [&](Sequence* s) {
    if (s->done) return;
    if (hard_stop) {
      Finish(s, FinishReason::kNone, absl::UnavailableError("server is shutting down"));
    } else if (std::find(cancels.begin(), cancels.end(), s->id) != cancels.end()) {
      Finish(s, FinishReason::kNone, absl::CancelledError("request cancelled"));
    } else if (now > s->req.deadline) {
      Finish(s, FinishReason::kNone, absl::DeadlineExceededError("request deadline exceeded"));
    }
  };
  for (auto& s : waiting_) check(s.get());
  for (auto& s : running_) check(s.get());
}

void Engine::Admit() {
  while (static_cast<int>(running_.size()) < options_.max_running && !waiting_.empty()) {
    auto pick = waiting_.begin();
    if (options_.policy == AdmissionPolicy::kFairShare) {
      // The waiting request whose adapter has the fewest running sequences (ties: the
      // earliest arrival), so one busy adapter cannot starve the others.
      std::map<std::string, int> running_per_adapter;
      for (auto& r : running_) ++running_per_adapter[r->req.adapter_id];
      int best = INT32_MAX;
      for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
        const int n = running_per_adapter[(*it)->req.adapter_id];
        if (n < best) {
          best = n;
          pick = it;
        }
      }
    }
    Sequence* s = pick->get();
    const int32_t seq = kv_->NewSequence();
    // Room for everything that must be prefilled plus the first decode token.
    if (!kv_->Reserve(seq, static_cast<int32_t>(s->history.size()) + 1).ok()) {
      kv_->Release(seq);
      return;  // the head waits for pages (FCFS order is kept)
    }
    s->kv_seq = seq;
    s->in_cache = 0;
    running_.push_back(std::move(*pick));
    waiting_.erase(pick);
  }
}

void Engine::Preempt(Sequence* s) {
  kv_->Release(s->kv_seq);
  s->kv_seq = -1;
  s->in_cache = 0;
  auto it = std::find_if(running_.begin(), running_.end(),
                         [s](const std::unique_ptr<Sequence>& p) { return p.get() == s; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
  {
    absl::MutexLock l(&mu_);
    ++stats_.preemptions;
  }
  if (observer_) observer_->OnPreemption();
}

bool Engine::BuildStep(std::vector<SequenceChunk>* chunks, std::vector<Sequence*>* owners) {
  chunks->clear();
  owners->clear();
  // Decode tokens need one more slot each; when the pool is dry, preempt the newest.
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* s = running_[i].get();
    if (!s->pending || s->in_cache < static_cast<int32_t>(s->history.size())) continue;
    while (!kv_->Reserve(s->kv_seq, s->in_cache + 1).ok()) {
      Sequence* victim = running_.back().get();
      Preempt(victim);
      if (victim == s) break;
    }
    if (i >= running_.size() || running_[i].get() != s) break;  // s itself was preempted
  }
  int budget = options_.max_batch_tokens;
  for (auto& up : running_) {
    Sequence* s = up.get();
    if (!s->pending || s->in_cache < static_cast<int32_t>(s->history.size())) continue;
    if (budget <= 0) break;
    SequenceChunk c;
    c.kv_seq = s->kv_seq;
    c.start_pos = s->in_cache;
    c.tokens = {*s->pending};
    c.logits = SequenceChunk::Logits::kLast;
    c.adapter = s->adapter.get();
    chunks->push_back(std::move(c));
    owners->push_back(s);
    --budget;
  }
  for (auto& up : running_) {
    Sequence* s = up.get();
    const int32_t target = static_cast<int32_t>(s->history.size());
    if (s->in_cache >= target || budget <= 0) continue;
    const int32_t n = std::min(budget, target - s->in_cache);
    SequenceChunk c;
    c.kv_seq = s->kv_seq;
    c.start_pos = s->in_cache;
    c.tokens.assign(s->history.begin() + s->in_cache, s->history.begin() + s->in_cache + n);
    // After a preemption the next token is already known (pending): no logits needed.
    c.logits = (s->in_cache + n == target && !s->pending) ? SequenceChunk::Logits::kLast
                                                          : SequenceChunk::Logits::kNone;
    c.adapter = s->adapter.get();
    chunks->push_back(std::move(c));
    owners->push_back(s);
    budget -= n;
  }
  return !chunks->empty();
}

void Engine::Finish(Sequence* s, FinishReason reason, absl::Status error) {
  if (s->done) return;
  s->done = true;
  StreamEvent ev;
  if (error.ok()) {
    if (reason != FinishReason::kStop) {
      ev.text = s->stop->Flush();
      ev.text += s->detok->Flush();
    }
  } else {
    ev.error = error;
  }
  ev.finished = true;
  ev.finish_reason = error.ok() ? reason : FinishReason::kNone;
  ev.prompt_tokens = s->prompt_len;
  ev.completion_tokens = s->completion_tokens;
  if (s->callback) s->callback(ev);
  if (observer_) {
    observer_->OnFinish(s->req.adapter_id, error, s->prompt_len, s->completion_tokens,
                        absl::Now() - s->arrival);
  }
  if (s->kv_seq >= 0) kv_->Release(s->kv_seq);
  s->kv_seq = -1;
  s->lease.Reset();
}

void Engine::HandleLogits(Sequence* s, const float* logits) {
  const int vocab = model_->config().vocab_size;
  const absl::Span<const float> row(logits, vocab);
  const int32_t tok = s->sampler->Sample(row, s->history);
  StreamEvent ev;
  ev.token_ids.push_back(tok);
  if (s->req.top_logprobs > 0) {
    ev.token_logprobs.push_back(Sampler::TokenLogprob(row, tok));
    ev.top_logprobs.push_back(Sampler::TopLogprobs(row, s->req.top_logprobs));
  }
  ++s->completion_tokens;
  const absl::Time now = absl::Now();
  if (observer_) {
    if (s->completion_tokens == 1) {
      observer_->OnFirstToken(s->req.adapter_id, now - s->arrival);
    } else {
      observer_->OnToken(s->req.adapter_id, now - s->last_token_time);
    }
  }
  s->last_token_time = now;
  absl::StatusOr<std::string> piece = s->detok->Push(tok);
  const StopChecker::Step st = s->stop->Update(tok, piece.ok() ? *piece : std::string());
  ev.text = st.text;
  if (st.finished) {
    ev.prompt_tokens = s->prompt_len;
    ev.completion_tokens = s->completion_tokens;
    // The final event carries the last token and the finish reason together.
    std::string tail;
    if (st.reason != FinishReason::kStop) tail = s->detok->Flush();
    ev.text += tail;
    ev.finished = true;
    ev.finish_reason = st.reason;
    s->done = true;
    if (s->callback) s->callback(ev);
    if (observer_) {
      observer_->OnFinish(s->req.adapter_id, absl::OkStatus(), s->prompt_len,
                          s->completion_tokens, now - s->arrival);
    }
    kv_->Release(s->kv_seq);
    s->kv_seq = -1;
    s->lease.Reset();
    return;
  }
  if (s->callback) s->callback(ev);
  s->pending = tok;
}

void Engine::Loop() {
  std::vector<SequenceChunk> chunks;
  std::vector<Sequence*> owners;
  const int vocab = model_->config().vocab_size;
  for (;;) {
    TakeInbox();
    auto reap = [](auto& v) {
      v.erase(std::remove_if(v.begin(), v.end(),
                             [](const std::unique_ptr<Sequence>& s) { return s->done; }),
              v.end());
    };
    reap(running_);
    reap(waiting_);
    Admit();
    const bool work = BuildStep(&chunks, &owners);
    {
      absl::MutexLock l(&mu_);
      queued_ = static_cast<int>(waiting_.size() + inbox_.size());
      stats_.running = static_cast<int>(running_.size());
      stats_.waiting = queued_;
      stats_.kv_pages_used = kv_->allocator().used_pages();
      if (!work) {
        if (stopping_ && running_.empty() && waiting_.empty() && inbox_.empty()) {
          stopped_ = true;
          return;
        }
        // Sleep until something arrives (or a deadline / grace period needs checking).
        auto has_input = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !inbox_.empty() || !cancels_.empty() || stopping_;
        };
        mu_.AwaitWithTimeout(absl::Condition(&has_input), absl::Milliseconds(50));
        continue;
      }
    }
    absl::StatusOr<BatchPlan> plan = BatchPlan::Build(chunks, *kv_, vocab);
    absl::Status status = plan.status();
    if (status.ok()) {
      const size_t rows = plan->logit_tokens().size();
      if (logits_.size() < rows * vocab) logits_.resize(rows * vocab);
      status = model_->Forward(*plan, kv_.get(), &ws_, logits_.data());
    }
    if (!status.ok()) {
      // A failed step fails the requests in it, never the daemon.
      for (Sequence* s : owners) Finish(s, FinishReason::kNone, status);
      continue;
    }
    int batch_tokens = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      Sequence* s = owners[c];
      s->in_cache += static_cast<int32_t>(chunks[c].tokens.size());
      batch_tokens += static_cast<int>(chunks[c].tokens.size());
      if (s->pending && s->in_cache > static_cast<int32_t>(s->history.size())) {
        s->history.push_back(*s->pending);  // the decode token is now in the cache
        s->pending.reset();
      }
      const auto [r0, r1] = plan->logit_rows(c);
      if (r1 > r0) HandleLogits(s, logits_.data() + static_cast<size_t>(r0) * vocab);
    }
    {
      absl::MutexLock l(&mu_);
      ++stats_.steps;
      stats_.last_batch_tokens = batch_tokens;
      stats_.last_batch_sequences = static_cast<int>(chunks.size());
      stats_.kv_pages_used = kv_->allocator().used_pages();
    }
    if (observer_) {
      observer_->OnStep(batch_tokens, static_cast<int>(chunks.size()),
                        static_cast<int>(running_.size()), static_cast<int>(waiting_.size()),
                        kv_->allocator().used_pages(), kv_->allocator().total_pages());
    }
  }
}

}  // namespace loom
