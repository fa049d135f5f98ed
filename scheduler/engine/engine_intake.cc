// Engine: the calls other threads make (Start with its invariant checks and on-demand
// adapters, Cancel, Load, Close, Shutdown). The engine thread's loop is in engine.cc.
#include <optional>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "scheduler/engine/engine.h"
#include "scheduler/engine/engine_sequence.h"

namespace loom {

absl::Status Engine::Check(const WorkerRequest& r) const {
  const int vocab = model_->config().vocab_size;
  if (r.context.empty()) return absl::InvalidArgumentError("context is empty");
  for (int32_t t : r.context) {
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "context token id %d is outside the vocabulary [0, %d)", t, vocab));
    }
  }
  if (r.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_new_tokens = %d must be >= 1", r.max_new_tokens));
  }
  if (r.generated_before < 0 || r.generated_before >= static_cast<int64_t>(r.context.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "generated_before = %d must be in [0, %d) (the context's length)", r.generated_before,
        r.context.size()));
  }
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "top_logprobs = %d is outside [0, %d]", r.top_logprobs, kMaxTopLogprobs));
  }
  const int64_t need = static_cast<int64_t>(r.context.size()) + r.max_new_tokens;
  if (need > max_context_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "context (%d tokens) + max_new_tokens (%d) exceeds this engine's context of %d "
        "tokens",
        r.context.size(), r.max_new_tokens, max_context_));
  }
  const int64_t pages_needed = (need + kv_->page_size() - 1) / kv_->page_size();
  if (pages_needed > kv_->allocator().total_pages()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d tokens exceed the KV cache capacity of %d tokens", need,
        int64_t{kv_->allocator().total_pages()} * kv_->page_size()));
  }
  return absl::OkStatus();
}

absl::Status Engine::Lease(Sequence* s) const {
  const std::string& id = s->req.adapter_id;
  if (id.empty()) return absl::OkStatus();
  if (adapters_ == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("adapter '%s' not found: no adapters are configured", id));
  }
  // Leased now: the adapter cannot be unloaded or evicted under this request.
  absl::StatusOr<AdapterLease> lease = adapters_->Acquire(id);
  if (!lease.ok()) return lease.status();
  s->lease = *std::move(lease);
  s->adapter = std::make_unique<LoraAdapterWeights>(s->lease.get());
  return absl::OkStatus();
}

absl::Status Engine::Enqueue(std::unique_ptr<Sequence> s) {
  absl::MutexLock l(&mu_);
  if (stopping_) return absl::UnavailableError("server is shutting down");
  if (queued_ >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("request queue is full (%d waiting)", queued_));
  }
  ++queued_;
  inbox_.push_back(std::move(s));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Engine::Start(WorkerRequest request, WorkerCallback callback) {
  if (absl::Status s = Check(request); !s.ok()) return s;
  SamplingOptions sampling = request.sampling;
  sampling.skip_draws = static_cast<uint64_t>(request.generated_before);
  absl::StatusOr<Sampler> sampler = Sampler::Create(sampling);  // validates the values
  if (!sampler.ok()) return sampler.status();
  auto seq = std::make_unique<Sequence>();
  seq->sampler.emplace(*std::move(sampler));
  seq->history = request.context;
  seq->req = std::move(request);
  seq->callback = std::move(callback);
  seq->arrival = absl::Now();
  {
    absl::MutexLock l(&mu_);
    if (closed_ || stopping_) {
      return absl::UnavailableError(absl::StrFormat("%s is shutting down", name()));
    }
    seq->id = next_id_++;
  }
  const uint64_t id = seq->id;
  if (seq->req.adapter_id.empty() || !options_.ensure_adapter) {
    if (absl::Status s = Lease(seq.get()); !s.ok()) return s;
    if (absl::Status s = Enqueue(std::move(seq)); !s.ok()) return s;
    return id;
  }
  // The adapter check may answer at once (a known id: its errors are Start's) or later
  // on a loader thread (OnAdapterReady). The sequence waits parked in loading_.
  const std::string adapter = seq->req.adapter_id;
  {
    absl::MutexLock l(&mu_);
    loading_[id] = std::move(seq);
  }
  struct Answer {
    absl::Mutex mu;
    bool returned = false;
    std::optional<absl::Status> early;
  };
  auto answer = std::make_shared<Answer>();
  options_.ensure_adapter(adapter, [this, answer, id](absl::Status s) {
    {
      absl::MutexLock l(&answer->mu);
      if (!answer->returned) {
        answer->early = std::move(s);
        return;
      }
    }
    OnAdapterReady(id, std::move(s));
  });
  std::optional<absl::Status> early;
  {
    absl::MutexLock l(&answer->mu);
    answer->returned = true;
    early = std::move(answer->early);
  }
  if (!early) return id;
  std::unique_ptr<Sequence> s;
  {
    absl::MutexLock l(&mu_);
    auto it = loading_.find(id);
    if (it == loading_.end()) return id;  // cancelled meanwhile: it ends as such
    s = std::move(it->second);
    loading_.erase(it);
  }
  if (!early->ok()) return *early;
  if (absl::Status st = Lease(s.get()); !st.ok()) return st;
  if (absl::Status st = Enqueue(std::move(s)); !st.ok()) return st;
  return id;
}

void Engine::OnAdapterReady(uint64_t id, absl::Status status) {
  std::unique_ptr<Sequence> s;
  {
    absl::MutexLock l(&mu_);
    auto it = loading_.find(id);
    if (it == loading_.end()) return;  // cancelled: already handed to the engine thread
    s = std::move(it->second);
    loading_.erase(it);
  }
  WorkerCallback callback = s->callback;
  if (status.ok()) status = Lease(s.get());
  if (status.ok()) status = Enqueue(std::move(s));
  if (status.ok()) return;
  WorkerEvent ev;
  ev.finished = true;
  ev.error = std::move(status);
  if (callback) callback(ev);
}

void Engine::Cancel(uint64_t id) {
  absl::MutexLock l(&mu_);
  cancels_.push_back(id);
  // A parked sequence goes to the engine thread, which ends it as cancelled.
  auto it = loading_.find(id);
  if (it != loading_.end()) {
    inbox_.push_back(std::move(it->second));
    loading_.erase(it);
  }
}

EngineStats Engine::GetStats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

absl::StatusOr<WorkerLoad> Engine::Load() {
  WorkerLoad load;
  {
    absl::MutexLock l(&mu_);
    load.running = stats_.running;
    load.queued = stats_.waiting;
    load.kv_pages_total = stats_.kv_pages_total;
    load.kv_pages_free = stats_.kv_pages_total - stats_.kv_pages_used;
    load.steps = static_cast<uint64_t>(stats_.steps);
    load.step_seconds_ewma = stats_.step_seconds_ewma;
    load.draining = closed_ || stopping_;
  }
  load.max_batch_size = options_.max_running;
  if (adapters_ != nullptr) {
    for (const AdapterInfo& info : adapters_->List()) {  // sorted by id
      if (info.resident) load.resident_adapters.push_back(info.id);
    }
  }
  return load;
}

void Engine::Close() {
  absl::MutexLock l(&mu_);
  closed_ = true;
}

void Engine::Shutdown(absl::Duration grace) {
  absl::MutexLock l(&mu_);
  stopping_ = true;
  hard_stop_ = std::min(hard_stop_, absl::Now() + grace);
  mu_.Await(absl::Condition(&stopped_));
}

}  // namespace loom
