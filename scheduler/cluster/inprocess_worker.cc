#include "scheduler/cluster/inprocess_worker.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "scheduler/cluster/worker_request_checks.h"

namespace loom {

struct InProcessWorker::Call {
  uint64_t handle = 0;
  WorkerCallback callback;
  bool logprobs = false;  // per-token logprobs requested (also implied by top > 0)
  int top = 0;            // alternatives requested per token

  absl::Mutex mu;
  std::optional<uint64_t> engine_id ABSL_GUARDED_BY(mu);
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  bool finished ABSL_GUARDED_BY(mu) = false;  // the finished event was delivered
};

struct InProcessWorker::Registry {
  absl::Mutex mu;
  uint64_t next_handle ABSL_GUARDED_BY(mu) = 1;
  std::map<uint64_t, std::shared_ptr<Call>> calls ABSL_GUARDED_BY(mu);

  uint64_t Add(std::shared_ptr<Call> call) {
    absl::MutexLock l(&mu);
    call->handle = next_handle++;
    calls.emplace(call->handle, std::move(call));
    return next_handle - 1;
  }
  void Forget(uint64_t handle) {
    absl::MutexLock l(&mu);
    calls.erase(handle);
  }
  std::shared_ptr<Call> Find(uint64_t handle) {
    absl::MutexLock l(&mu);
    auto it = calls.find(handle);
    return it == calls.end() ? nullptr : it->second;
  }
};

namespace {

WorkerEvent ToWorkerEvent(const StreamEvent& e, bool logprobs, int top) {
  WorkerEvent w;
  w.token_ids = e.token_ids;
  if (logprobs) w.logprobs = e.token_logprobs;
  if (top > 0) w.top_logprobs = e.top_logprobs;
  w.finished = e.finished;
  // No stop strings reach the engine, so kStop can only be an end-of-generation token.
  w.end_of_generation = e.finished && e.error.ok() && e.finish_reason == FinishReason::kStop;
  w.error = e.error;
  return w;
}

}  // namespace

absl::StatusOr<EngineRequest> WorkerToEngineRequest(const WorkerRequest& request) {
  if (absl::Status s = CheckWorkerRequest(request); !s.ok()) return s;
  EngineRequest e;
  e.adapter_id = request.adapter_id;
  e.prompt = request.context;
  e.sampling = request.sampling;
  e.sampling.skip_draws = static_cast<uint64_t>(request.generated_before);
  e.max_tokens = request.max_new_tokens;
  e.stop_at_end_of_generation = request.stop_at_end_of_generation;
  // The engine computes logprobs only alongside alternatives: ask for one, drop it.
  e.top_logprobs = request.top_logprobs > 0 ? request.top_logprobs : (request.logprobs ? 1 : 0);
  e.deadline = request.deadline;
  return e;
}

InProcessWorker::InProcessWorker(Engine* engine, InProcessWorkerOptions options)
    : engine_(engine), options_(std::move(options)), registry_(std::make_shared<Registry>()) {}

InProcessWorker::~InProcessWorker() = default;

void InProcessWorker::Deliver(Registry* registry, Call* call, const WorkerEvent& ev) {
  if (ev.finished) {
    {
      absl::MutexLock l(&call->mu);
      if (call->finished) return;
      call->finished = true;
    }
    registry->Forget(call->handle);
  }
  call->callback(ev);
}

absl::Status InProcessWorker::Submit(Engine* engine, const std::shared_ptr<Registry>& registry,
                                     const std::shared_ptr<Call>& call, EngineRequest request) {
  {
    absl::MutexLock l(&call->mu);
    if (call->cancelled) return absl::CancelledError("request cancelled");
  }
  // The callback keeps the call and registry alive (the engine may outlive this worker).
  absl::StatusOr<uint64_t> id =
      engine->Submit(std::move(request), [registry, call](const StreamEvent& e) {
        Deliver(registry.get(), call.get(), ToWorkerEvent(e, call->logprobs, call->top));
      });
  if (!id.ok()) return id.status();
  absl::MutexLock l(&call->mu);
  call->engine_id = *id;
  // Cancelled between the check above and Submit: the engine ends it at its next step.
  if (call->cancelled && !call->finished) engine->Cancel(*id);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> InProcessWorker::Start(WorkerRequest request,
                                                WorkerCallback callback) {
  {
    absl::MutexLock l(&mu_);
    if (closed_) return absl::UnavailableError(absl::StrFormat("worker %s is closed", name()));
  }
  absl::StatusOr<EngineRequest> req = WorkerToEngineRequest(request);
  if (!req.ok()) return req.status();
  auto call = std::make_shared<Call>();
  call->callback = std::move(callback);
  call->logprobs = request.logprobs || request.top_logprobs > 0;
  call->top = request.top_logprobs;
  const uint64_t handle = registry_->Add(call);
  if (req->adapter_id.empty() || !options_.ensure_adapter) {
    if (absl::Status s = Submit(engine_, registry_, call, *std::move(req)); !s.ok()) {
      registry_->Forget(handle);
      return s;
    }
    return handle;
  }
  // The adapter check may answer at once (known id) or later on a loader thread. An
  // answer that comes before Start returns is handled here, synchronously; a later one
  // submits (or reports the failure as the finished event) on the loader thread; it may
  // run after this worker is gone, so it captures the engine and registry, not `this`.
  struct Pending {
    absl::Mutex mu;
    bool returned = false;
    std::optional<absl::Status> early;
  };
  auto pending = std::make_shared<Pending>();
  auto shared_req = std::make_shared<EngineRequest>(*std::move(req));
  Engine* engine = engine_;
  std::shared_ptr<Registry> registry = registry_;
  options_.ensure_adapter(
      shared_req->adapter_id, [pending, shared_req, engine, registry, call](absl::Status s) {
        {
          absl::MutexLock l(&pending->mu);
          if (!pending->returned) {
            pending->early = std::move(s);
            return;
          }
        }
        if (s.ok()) s = Submit(engine, registry, call, std::move(*shared_req));
        if (s.ok()) return;
        WorkerEvent ev;
        ev.finished = true;
        ev.error = std::move(s);
        Deliver(registry.get(), call.get(), ev);
      });
  std::optional<absl::Status> early;
  {
    absl::MutexLock l(&pending->mu);
    pending->returned = true;
    early = std::move(pending->early);
  }
  if (!early) return handle;  // a loader thread takes it from here
  absl::Status s = *early;
  if (s.ok()) s = Submit(engine_, registry_, call, std::move(*shared_req));
  if (!s.ok()) {
    registry_->Forget(handle);
    return s;
  }
  return handle;
}

void InProcessWorker::Cancel(uint64_t handle) {
  std::shared_ptr<Call> call = registry_->Find(handle);
  if (call == nullptr) return;
  absl::MutexLock l(&call->mu);
  call->cancelled = true;
  // Not submitted yet: the pending adapter load reports kCancelled when it completes.
  if (call->engine_id && !call->finished) engine_->Cancel(*call->engine_id);
}

absl::StatusOr<WorkerLoad> InProcessWorker::Load() {
  const EngineStats st = engine_->GetStats();
  WorkerLoad load;
  load.running = st.running;
  load.queued = st.waiting;
  load.kv_pages_total = st.kv_pages_total;
  load.kv_pages_free = st.kv_pages_total - st.kv_pages_used;
  load.max_batch_size = options_.max_batch_size;
  load.steps = static_cast<uint64_t>(st.steps);
  if (options_.adapters != nullptr) {
    for (const AdapterInfo& info : options_.adapters->List()) {  // sorted by id
      if (info.resident) load.resident_adapters.push_back(info.id);
    }
  }
  const absl::Time now = absl::Now();
  absl::MutexLock l(&mu_);
  load.draining = closed_;
  if (last_running_ && st.running > 0 && st.steps > last_steps_) {
    const double sample =
        absl::ToDoubleSeconds(now - last_sample_) / static_cast<double>(st.steps - last_steps_);
    step_ewma_ = step_ewma_ == 0.0 ? sample
                                   : options_.step_ewma_weight * sample +
                                         (1.0 - options_.step_ewma_weight) * step_ewma_;
  }
  last_steps_ = st.steps;
  last_running_ = st.running > 0;
  last_sample_ = now;
  load.step_seconds_ewma = step_ewma_;
  return load;
}

void InProcessWorker::Close() {
  absl::MutexLock l(&mu_);
  closed_ = true;
}

}  // namespace loom
