#include "scheduler/engine/engine.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "models/sampling/sampler.h"
#include "scheduler/engine/engine_sequence.h"

namespace loom {


namespace {

int ContextOf(const LlamaModel& model, const EngineOptions& o) {
  const int m = model.config().max_context;
  return o.max_context > 0 ? std::min(m, o.max_context) : m;
}

// Distinct non-empty adapter ids of `seqs`, sorted.
template <typename Container>
std::vector<std::string> AdapterIds(const Container& seqs) {
  std::set<std::string> ids;
  for (const auto& s : seqs) {
    if (!s->req.adapter_id.empty()) ids.insert(s->req.adapter_id);
  }
  return std::vector<std::string>(ids.begin(), ids.end());
}

}  // namespace

Engine::Engine(const LlamaModel* model, std::vector<int32_t> eog, AdapterStore* adapters,
               EngineObserver* observer, EngineOptions options,
               std::unique_ptr<PagedKvCache> kv, int max_context)
    : model_(model),
      eog_ids_(std::move(eog)),
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

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const LlamaModel* model, std::vector<int32_t> end_of_generation_ids,
    AdapterStore* adapters, EngineObserver* observer, const EngineOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("Engine: a model is required");
  if (options.max_batch_tokens < 1 || options.max_running < 1 || options.max_queued < 0) {
    return absl::InvalidArgumentError(
        "Engine: max_batch_tokens and max_running must be >= 1, max_queued >= 0");
  }
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv =
      PagedKvCache::Create(model->config(), options.kv);
  if (!kv.ok()) return kv.status();
  std::unique_ptr<Engine> e(new Engine(model, std::move(end_of_generation_ids), adapters,
                                       observer, options, *std::move(kv),
                                       ContextOf(*model, options)));
  e->thread_ = std::thread([raw = e.get()] { raw->Loop(); });
  return e;
}

Engine::~Engine() {
  Shutdown(absl::ZeroDuration());
  if (thread_.joinable()) thread_.join();
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
    if (hard_stop) {  // adapter loads still pending end with the rest
      for (auto& [id, s] : loading_) in.push_back(std::move(s));
      loading_.clear();
    }
  }
  for (auto& s : in) waiting_.push_back(std::move(s));
  const absl::Time now = absl::Now();
  auto check = [&](Sequence* s) {
    if (s->done) return;
    if (hard_stop) {
      Finish(s, false, absl::UnavailableError("server is shutting down"));
    } else if (std::find(cancels.begin(), cancels.end(), s->id) != cancels.end()) {
      Finish(s, false, absl::CancelledError("request cancelled"));
    } else if (now > s->req.deadline) {
      Finish(s, false, absl::DeadlineExceededError("request deadline exceeded"));
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

void Engine::Finish(Sequence* s, bool end_of_generation, absl::Status error) {
  if (s->done) return;
  s->done = true;
  WorkerEvent ev;
  ev.finished = true;
  ev.end_of_generation = end_of_generation && error.ok();
  ev.error = error;
  if (s->callback) s->callback(ev);
  if (observer_) {
    observer_->OnFinish(s->req.adapter_id, error, static_cast<int>(s->req.context.size()),
                        s->completion_tokens, absl::Now() - s->arrival);
  }
  if (s->kv_seq >= 0) kv_->Release(s->kv_seq);
  s->kv_seq = -1;
  s->lease.Reset();
}

void Engine::HandleLogits(Sequence* s, const float* logits) {
  const absl::Span<const float> row(logits, model_->config().vocab_size);
  const int32_t tok = s->sampler->Sample(row, s->history);
  WorkerEvent ev;
  ev.token_ids.push_back(tok);
  if (s->req.logprobs || s->req.top_logprobs > 0) {
    ev.logprobs.push_back(Sampler::TokenLogprob(row, tok));
  }
  if (s->req.top_logprobs > 0) {
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
  const bool eog = s->req.stop_at_end_of_generation &&
                   std::find(eog_ids_.begin(), eog_ids_.end(), tok) != eog_ids_.end();
  if (!eog && s->completion_tokens < s->req.max_new_tokens) {
    if (s->callback) s->callback(ev);
    s->pending = tok;
    return;
  }
  // The final event carries the last token.
  s->done = true;
  ev.finished = true;
  ev.end_of_generation = eog;
  if (s->callback) s->callback(ev);
  if (observer_) {
    observer_->OnFinish(s->req.adapter_id, absl::OkStatus(),
                        static_cast<int>(s->req.context.size()), s->completion_tokens,
                        now - s->arrival);
  }
  kv_->Release(s->kv_seq);
  s->kv_seq = -1;
  s->lease.Reset();
}

void Engine::PublishStats(int batch_tokens, int batch_sequences, absl::Duration step_time) {
  absl::MutexLock l(&mu_);
  ++stats_.steps;
  stats_.last_batch_tokens = batch_tokens;
  stats_.last_batch_sequences = batch_sequences;
  stats_.kv_pages_used = kv_->allocator().used_pages();
  const double t = absl::ToDoubleSeconds(step_time);
  const double w = options_.step_ewma_weight;
  stats_.step_seconds_ewma =
      stats_.step_seconds_ewma == 0.0 ? t : w * t + (1.0 - w) * stats_.step_seconds_ewma;
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
    std::vector<std::string> running_adapters = AdapterIds(running_);
    std::vector<std::string> waiting_adapters = AdapterIds(waiting_);
    {
      absl::MutexLock l(&mu_);
      queued_ = static_cast<int>(waiting_.size() + inbox_.size());
      stats_.running = static_cast<int>(running_.size());
      stats_.waiting = queued_;
      stats_.kv_pages_used = kv_->allocator().used_pages();
      stats_.running_adapters = std::move(running_adapters);
      stats_.waiting_adapters = std::move(waiting_adapters);
      if (!work) {
        if (stopping_ && running_.empty() && waiting_.empty() && inbox_.empty() &&
            loading_.empty()) {
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
    const absl::Time step_start = absl::Now();
    absl::StatusOr<BatchPlan> plan = BatchPlan::Build(chunks, *kv_, vocab);
    absl::Status status = plan.status();
    if (status.ok()) {
      const size_t rows = plan->logit_tokens().size();
      if (logits_.size() < rows * vocab) logits_.resize(rows * vocab);
      status = model_->Forward(*plan, kv_.get(), &ws_, logits_.data());
    }
    if (!status.ok()) {
      // A failed step fails the requests in it, never the daemon.
      for (Sequence* s : owners) Finish(s, false, status);
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
    PublishStats(batch_tokens, static_cast<int>(chunks.size()), absl::Now() - step_start);
    if (observer_) {
      observer_->OnStep(batch_tokens, static_cast<int>(chunks.size()),
                        static_cast<int>(running_.size()), static_cast<int>(waiting_.size()),
                        kv_->allocator().used_pages(), kv_->allocator().total_pages());
    }
  }
}

}  // namespace loom
