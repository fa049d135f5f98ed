#include "server/router/router_generate_reactor.h"

#include <chrono>
#include <deque>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/request_conversion.h"
#include "server/status_mapping.h"
#include "server/stream_writer.h"

namespace loom {

struct RouterGenerateReactor::State {
  absl::Mutex mu;
  StreamWriter<v1::GenerateResponse> writer ABSL_GUARDED_BY(mu);
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  std::optional<uint64_t> id ABSL_GUARDED_BY(mu);
  bool logprobs = false;
  int top = 0;
  std::string adapter_id;
  ServerMetrics* metrics = nullptr;
  ClusterFrontend* frontend = nullptr;

  void End(grpc::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!writer.SetFinal(std::move(s))) return;
    Pump();
  }

  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    grpc::ServerWriteReactor<v1::GenerateResponse>* r = writer.Pump();
    if (r == nullptr) return;
    const grpc::Status& status = writer.status();
    if (metrics != nullptr) {
      metrics->RecordRequest(adapter_id, static_cast<absl::StatusCode>(status.error_code()));
    }
    r->Finish(status);
  }

  void OnEvent(const StreamEvent& e) {
    absl::MutexLock l(&mu);
    if (writer.final_seen()) return;
    const bool has_payload = !e.text.empty() || !e.token_ids.empty();
    if (has_payload || (e.finished && e.error.ok())) {
      writer.Push(ToResponse(e, logprobs, top));
    }
    if (e.finished) {
      End(ToGrpcStatus(e.error));
    } else {
      Pump();
    }
  }
};

RouterGenerateReactor::RouterGenerateReactor(Deps deps, grpc::CallbackServerContext* ctx,
                                             const v1::GenerateRequest* request)
    : deps_(deps), ctx_(ctx), state_(std::make_shared<State>()) {
  state_->adapter_id = request->adapter_id();
  state_->metrics = deps.metrics;
  state_->frontend = deps.frontend;
  state_->logprobs = request->logprobs() || request->top_logprobs() > 0;
  state_->top = request->top_logprobs();
  std::shared_ptr<State> state = state_;
  {
    absl::MutexLock l(&state->mu);
    state->writer.Attach(this);
  }
  if (!deps_.serving->load(std::memory_order_acquire)) {
    absl::MutexLock l(&state->mu);
    state->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
    return;
  }
  absl::StatusOr<EngineRequest> req = ToEngineRequest(*request, *deps_.model);
  if (!req.ok()) {
    absl::MutexLock l(&state->mu);
    state->End(ToGrpcStatus(req.status()));
    return;
  }
  const auto deadline = ctx_->deadline();
  if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    req->deadline = absl::FromChrono(deadline);
  }
  // The final event may finish the call (deleting this reactor) before Submit returns:
  // only locals are used after it.
  ClusterFrontend* frontend = deps_.frontend;
  absl::StatusOr<uint64_t> id = frontend->Submit(
      *std::move(req), [state](const StreamEvent& e) { state->OnEvent(e); });
  absl::MutexLock l(&state->mu);
  if (!id.ok()) {
    state->End(ToGrpcStatus(id.status()));
    return;
  }
  state->id = *id;
  if (state->cancelled && !state->writer.final_seen()) frontend->Cancel(*id);
}

void RouterGenerateReactor::OnWriteDone(bool ok) {
  absl::MutexLock l(&state_->mu);
  if (state_->writer.WriteDone(ok) && state_->id && !state_->writer.final_seen()) {
    deps_.frontend->Cancel(*state_->id);
  }
  state_->Pump();
}

void RouterGenerateReactor::OnCancel() {
  absl::MutexLock l(&state_->mu);
  state_->cancelled = true;
  if (state_->id && !state_->writer.final_seen()) deps_.frontend->Cancel(*state_->id);
}

void RouterGenerateReactor::OnDone() { delete this; }

}  // namespace loom
