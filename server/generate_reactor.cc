#include "server/generate_reactor.h"

#include <chrono>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/loom/v1/inference.pb.h"
#include "server/grpc_inference_messages.h"
#include "server/grpc_message_codec.h"
#include "server/status_mapping.h"
#include "server/stream_writer.h"
#include "spdlog/spdlog.h"

namespace loom {

std::string Authorization(const grpc::CallbackServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

struct GenerateReactor::State {
  absl::Mutex mu;
  StreamWriter<grpc::ByteBuffer> writer ABSL_GUARDED_BY(mu);
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  std::optional<uint64_t> id ABSL_GUARDED_BY(mu);
  AdmissionTicket ticket ABSL_GUARDED_BY(mu);
  int prompt_tokens ABSL_GUARDED_BY(mu) = 0;
  int completion_tokens ABSL_GUARDED_BY(mu) = 0;
  // Set before Submit, constant after.
  Frontend* frontend = nullptr;
  ServerMetrics* metrics = nullptr;
  std::string adapter_id;
  bool logprobs = false;
  int top = 0;

  // Ends the call with `s` once the queued messages are written.
  void End(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!writer.SetFinal(GrpcStatusForClient(s))) return;
    Pump();
  }

  // Starts the next write, or finishes when everything is written.
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    grpc::ServerWriteReactor<grpc::ByteBuffer>* r = writer.Pump();
    if (r == nullptr) return;
    const grpc::Status& status = writer.status();
    ticket.Finish(static_cast<absl::StatusCode>(status.error_code()), prompt_tokens,
                  completion_tokens);
    ticket = AdmissionTicket();  // the tenant's stream slot is free again
    if (metrics != nullptr) {
      metrics->RecordRequest(adapter_id, static_cast<absl::StatusCode>(status.error_code()));
    }
    if (!status.ok()) {
      spdlog::debug("event=generate_end code={} error=\"{}\"",
                    static_cast<int>(status.error_code()), status.error_message());
    }
    r->Finish(status);
  }

  // Cancels the request unless it is over. REQUIRES: mu held.
  void CancelRequest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (id && !writer.final_seen()) frontend->Cancel(*id);
  }

  void OnEvent(const StreamEvent& e) {
    absl::MutexLock l(&mu);
    if (writer.final_seen()) return;
    prompt_tokens = e.prompt_tokens;
    completion_tokens = e.completion_tokens;
    const bool has_payload = !e.text.empty() || !e.token_ids.empty();
    // A failed final event's tokens still go out before the error status.
    if (has_payload || (e.finished && e.error.ok())) {
      writer.Push(SerializeResponse(ToResponse(e, logprobs, top)));
    }
    if (e.finished) {
      End(e.error);
    } else {
      Pump();
    }
  }
};

GenerateReactor::GenerateReactor(const InferenceEdge* edge, grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request)
    : state_(std::make_shared<State>()) {
  state_->frontend = edge->frontend();
  state_->metrics = edge->metrics();
  {
    absl::MutexLock l(&state_->mu);
    state_->writer.Attach(this);
  }
  Start(edge, ctx, request);
}

void GenerateReactor::Start(const InferenceEdge* edge, grpc::CallbackServerContext* ctx,
                            const grpc::ByteBuffer* request) {
  // The final event may finish the call (and delete this reactor) before Submit
  // returns: only locals are used after it.
  std::shared_ptr<State> state = state_;
  v1::GenerateRequest proto;
  const absl::Status parsed = ParseRequest(*request, &proto);
  state->adapter_id = proto.adapter_id();
  state->logprobs = proto.logprobs() || proto.top_logprobs() > 0;
  state->top = proto.top_logprobs();
  absl::StatusOr<PreparedRequest> req =
      parsed.ok() ? edge->Prepare(Authorization(*ctx), FromProto(proto))
                  : absl::StatusOr<PreparedRequest>(parsed);
  if (!req.ok()) {
    absl::MutexLock l(&state->mu);
    if (RetryAfter(req.status())) {
      ctx->AddTrailingMetadata(
          "retry-after", std::to_string(absl::ToInt64Seconds(*RetryAfter(req.status()))));
    }
    state->End(req.status());
    return;
  }
  {
    absl::MutexLock l(&state->mu);
    state->ticket = std::move(req->ticket);
  }
  const auto deadline = ctx->deadline();
  if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    req->request.deadline = absl::FromChrono(deadline);
  }
  Frontend* frontend = state->frontend;
  absl::StatusOr<uint64_t> id = frontend->Submit(
      std::move(req->request), [state](const StreamEvent& e) { state->OnEvent(e); });
  absl::MutexLock l(&state->mu);
  if (!id.ok()) {
    state->End(id.status());
    return;
  }
  state->id = *id;
  // Cancelled, or the client gone, while submitting: end it at the next step.
  if (state->cancelled || state->writer.write_failed()) state->CancelRequest();
}

void GenerateReactor::OnWriteDone(bool ok) {
  absl::MutexLock l(&state_->mu);
  if (state_->writer.WriteDone(ok)) state_->CancelRequest();
  state_->Pump();
}

void GenerateReactor::OnCancel() {
  absl::MutexLock l(&state_->mu);
  state_->cancelled = true;
  state_->CancelRequest();
}

void GenerateReactor::OnDone() { delete this; }

}  // namespace loom
