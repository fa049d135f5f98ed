#include "server/worker/worker_service.h"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "scheduler/cluster/worker_proto.h"
#include "server/status_mapping.h"
#include "spdlog/spdlog.h"
#include "server/stream_writer.h"

namespace loom {
namespace {

namespace pb = internal::v1;

class WorkerGenerateReactor final : public grpc::ServerWriteReactor<pb::WorkerGenerateResponse> {
 public:
  WorkerGenerateReactor(Worker* worker, const std::atomic<bool>* serving,
                        ServerMetrics* metrics, grpc::CallbackServerContext* ctx,
                        const pb::WorkerGenerateRequest* request)
      : worker_(worker), state_(std::make_shared<State>()) {
    state_->metrics = metrics;
    state_->adapter_id = request->adapter_id();
    {
      absl::MutexLock l(&state_->mu);
      state_->writer.Attach(this);
    }
    Start(serving, ctx, request);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&state_->mu);
    if (state_->writer.WriteDone(ok) && state_->handle && !state_->writer.final_seen()) {
      worker_->Cancel(*state_->handle);
    }
    state_->Pump();
  }

  void OnCancel() override {
    absl::MutexLock l(&state_->mu);
    state_->cancelled = true;
    if (state_->handle && !state_->writer.final_seen()) worker_->Cancel(*state_->handle);
  }

  void OnDone() override { delete this; }

 private:
  struct State {
    absl::Mutex mu;
    StreamWriter<pb::WorkerGenerateResponse> writer ABSL_GUARDED_BY(mu);
    bool cancelled ABSL_GUARDED_BY(mu) = false;
    std::optional<uint64_t> handle ABSL_GUARDED_BY(mu);
    ServerMetrics* metrics = nullptr;
    std::string adapter_id;

    // Ends the call with `s` once the queued messages are written.
    void End(grpc::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      if (!writer.SetFinal(std::move(s))) return;
      Pump();
    }

    // Starts the next write, or finishes once everything is written.
    void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      grpc::ServerWriteReactor<pb::WorkerGenerateResponse>* r = writer.Pump();
      if (r == nullptr) return;
      const grpc::Status& status = writer.status();
      if (metrics != nullptr) {
        metrics->RecordRequest(adapter_id, static_cast<absl::StatusCode>(status.error_code()));
      }
      if (!status.ok()) {
        spdlog::debug("event=worker_generate_end adapter={} code={} error=\"{}\"", adapter_id,
                      static_cast<int>(status.error_code()), status.error_message());
      }
      r->Finish(status);
    }

    void OnEvent(const WorkerEvent& e) {
      absl::MutexLock l(&mu);
      if (writer.final_seen()) return;
      if (e.finished && !e.error.ok()) {
        if (!e.token_ids.empty()) {
          WorkerEvent tokens = e;
          tokens.finished = false;
          tokens.end_of_generation = false;
          writer.Push(ToProto(tokens));
        }
        End(GrpcStatusForClient(e.error));
        return;
      }
      if (!e.token_ids.empty() || e.finished) writer.Push(ToProto(e));
      if (e.finished) {
        End(grpc::Status::OK);
      } else {
        Pump();
      }
    }
  };

  void Start(const std::atomic<bool>* serving, grpc::CallbackServerContext* ctx,
             const pb::WorkerGenerateRequest* request) {
    if (!serving->load(std::memory_order_acquire)) {
      absl::MutexLock l(&state_->mu);
      state_->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker is shutting down"));
      return;
    }
    WorkerRequest req = FromProto(*request);
    const auto deadline = ctx->deadline();
    if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
      req.deadline = absl::FromChrono(deadline);
    }
    // The final event may finish the call (and delete this reactor) before Start returns:
    // only locals are used after it.
    std::shared_ptr<State> state = state_;
    Worker* worker = worker_;
    absl::StatusOr<uint64_t> handle =
        worker->Start(std::move(req), [state](const WorkerEvent& e) { state->OnEvent(e); });
    absl::MutexLock l(&state->mu);
    if (!handle.ok()) {
      state->End(GrpcStatusForClient(handle.status()));
      return;
    }
    state->handle = *handle;
    // Cancelled while starting: the worker ends it with kCancelled.
    if ((state->cancelled || state->writer.write_failed()) && !state->writer.final_seen()) {
      worker->Cancel(*handle);
    }
  }

  Worker* const worker_;
  std::shared_ptr<State> state_;
};

}  // namespace

grpc::ServerWriteReactor<pb::WorkerGenerateResponse>* WorkerService::Generate(
    grpc::CallbackServerContext* ctx, const pb::WorkerGenerateRequest* request) {
  return new WorkerGenerateReactor(worker_, serving_, metrics_, ctx, request);
}

grpc::ServerUnaryReactor* WorkerService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                   const pb::HeartbeatRequest*,
                                                   pb::WorkerLoadReport* report) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<WorkerLoad> load = worker_->Load();
  if (!load.ok()) {
    reactor->Finish(GrpcStatusForClient(load.status()));
    return reactor;
  }
  if (!serving_->load(std::memory_order_acquire)) load->draining = true;
  *report = ToProto(*load);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace loom
