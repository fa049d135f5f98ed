#include "server/generate_reactor.h"

#include <chrono>
#include <deque>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/request_conversion.h"
#include "server/status_mapping.h"
#include "spdlog/spdlog.h"
#include "server/stream_writer.h"

namespace loom {

struct GenerateReactor::State {
  absl::Mutex mu;
  StreamWriter<v1::GenerateResponse> writer ABSL_GUARDED_BY(mu);
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  std::optional<uint64_t> engine_id ABSL_GUARDED_BY(mu);
  bool logprobs = false;
  int top = 0;
  std::string adapter_id;
  ServerMetrics* metrics = nullptr;
  Engine* engine = nullptr;

  // Ends the call with `s` once the queued messages are written.
  void End(grpc::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!writer.SetFinal(std::move(s))) return;
    Pump();
  }

  // Starts the next write, or finishes when everything is written.
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    grpc::ServerWriteReactor<v1::GenerateResponse>* r = writer.Pump();
    if (r == nullptr) return;
    const grpc::Status& status = writer.status();
    if (metrics != nullptr) {
      metrics->RecordRequest(adapter_id, static_cast<absl::StatusCode>(status.error_code()));
    }
    if (!status.ok()) {
      spdlog::debug("event=generate_end adapter={} code={} error=\"{}\"", adapter_id,
                    static_cast<int>(status.error_code()), status.error_message());
    }
    r->Finish(status);
  }

  void OnEvent(const StreamEvent& e) {
    absl::MutexLock l(&mu);
    if (writer.final_seen()) return;
    const bool has_payload = !e.text.empty() || !e.token_ids.empty();
    if (!e.finished || e.error.ok()) {
      if (has_payload || e.finished) writer.Push(ToResponse(e, logprobs, top));
    } else if (has_payload) {
      writer.Push(ToResponse(e, logprobs, top));
    }
    if (e.finished) {
      End(ToGrpcStatus(e.error));
    } else {
      Pump();
    }
  }
};

GenerateReactor::GenerateReactor(Deps deps, grpc::CallbackServerContext* ctx,
                                 const v1::GenerateRequest* request)
    : deps_(deps), ctx_(ctx), request_(request), state_(std::make_shared<State>()) {
  state_->adapter_id = request->adapter_id();
  state_->metrics = deps.metrics;
  state_->engine = deps.engine;
  state_->logprobs = request->logprobs() || request->top_logprobs() > 0;
  state_->top = request->top_logprobs();
  {
    absl::MutexLock l(&state_->mu);
    state_->writer.Attach(this);
  }
  Start();
}

void GenerateReactor::Start() {
  if (!deps_.serving->load(std::memory_order_acquire)) {
    absl::MutexLock l(&state_->mu);
    state_->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
    return;
  }
  absl::StatusOr<EngineRequest> req = ToEngineRequest(*request_, *deps_.model);
  if (!req.ok()) {
    absl::MutexLock l(&state_->mu);
    state_->End(ToGrpcStatus(req.status()));
    return;
  }
  // The call's deadline ends the request at the engine's next step.
  const auto deadline = ctx_->deadline();
  if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    req->deadline = absl::FromChrono(deadline);
  }
  if (req->adapter_id.empty()) return Submit(*std::move(req));
  auto shared = std::make_shared<EngineRequest>(*std::move(req));
  deps_.adapters->EnsureKnownAsync(
      shared->adapter_id, [this, state = state_, shared](absl::Status s) {
        if (!s.ok()) {
          absl::MutexLock l(&state->mu);
          state->End(ToGrpcStatus(s));
          return;
        }
        Submit(std::move(*shared));
      });
}

void GenerateReactor::Submit(EngineRequest request) {
  // The final event may finish the call (and delete this reactor) before Submit returns:
  // only locals are used after it.
  std::shared_ptr<State> state = state_;
  Engine* engine = deps_.engine;
  {
    absl::MutexLock l(&state->mu);
    if (state->cancelled) {
      state->End(grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled"));
      return;
    }
  }
  absl::StatusOr<uint64_t> id =
      engine->Submit(std::move(request), [state](const StreamEvent& e) { state->OnEvent(e); });
  absl::MutexLock l(&state->mu);
  if (!id.ok()) {
    state->End(ToGrpcStatus(id.status()));
    return;
  }
  state->engine_id = *id;
  // Cancelled between the check above and Submit: the engine ends it at its next step.
  if (state->cancelled && !state->writer.final_seen()) engine->Cancel(*id);
}

void GenerateReactor::OnWriteDone(bool ok) {
  absl::MutexLock l(&state_->mu);
  if (state_->writer.WriteDone(ok) && state_->engine_id && !state_->writer.final_seen()) {
    deps_.engine->Cancel(*state_->engine_id);
  }
  state_->Pump();
}

void GenerateReactor::OnCancel() {
  absl::MutexLock l(&state_->mu);
  state_->cancelled = true;
  if (state_->engine_id && !state_->writer.final_seen()) deps_.engine->Cancel(*state_->engine_id);
}

void GenerateReactor::OnDone() { delete this; }

}  // namespace loom
