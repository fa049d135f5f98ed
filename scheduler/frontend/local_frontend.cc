#include "scheduler/frontend/local_frontend.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "scheduler/frontend/client_stream.h"

namespace loom {

// One request: its text stream and the worker handle that produces its tokens. Kept
// alive by the worker's callback.
struct LocalFrontend::Call {
  Worker* worker = nullptr;
  StreamCallback callback;

  absl::Mutex mu;
  std::unique_ptr<ClientStream> stream ABSL_GUARDED_BY(mu);
  std::optional<uint64_t> handle ABSL_GUARDED_BY(mu);
  bool cancel_when_started ABSL_GUARDED_BY(mu) = false;  // finished before Start returned
  bool finished ABSL_GUARDED_BY(mu) = false;  // the final StreamEvent was delivered

  // On the worker's thread. Events of one request are serialized by the worker.
  void OnWorkerEvent(const WorkerEvent& e) {
    std::vector<StreamEvent> out;  // delivered in order, outside the lock
    std::optional<uint64_t> cancel;
    {
      absl::MutexLock l(&mu);
      if (finished) return;
      if (!e.token_ids.empty()) {
        StreamEvent tokens = stream->OnTokens(e);
        finished = tokens.finished;
        if (!tokens.text.empty() || !tokens.token_ids.empty() || tokens.finished) {
          out.push_back(std::move(tokens));
        }
      }
      if (finished && !e.finished) {
        // Finished by the text layer (a stop string): the worker's request runs on.
        if (handle) {
          cancel = handle;
        } else {
          cancel_when_started = true;
        }
      } else if (!finished && e.finished) {
        out.push_back(stream->Finish(e.error, e.end_of_generation));
        finished = true;
      }
    }
    if (cancel) worker->Cancel(*cancel);
    if (callback) {
      for (const StreamEvent& ev : out) callback(ev);
    }
  }
};

absl::StatusOr<uint64_t> LocalFrontend::Submit(FrontendRequest request,
                                               StreamCallback callback) {
  absl::StatusOr<std::unique_ptr<ClientStream>> stream =
      ClientStream::Create(*tokenizer_, std::move(request));
  if (!stream.ok()) return stream.status();
  auto call = std::make_shared<Call>();
  call->worker = worker_;
  call->callback = std::move(callback);
  WorkerRequest placement = (*stream)->Placement();
  {
    absl::MutexLock l(&call->mu);
    call->stream = *std::move(stream);
  }
  absl::StatusOr<uint64_t> handle = worker_->Start(
      std::move(placement), [call](const WorkerEvent& e) { call->OnWorkerEvent(e); });
  if (!handle.ok()) return handle.status();
  bool cancel = false;
  {
    absl::MutexLock l(&call->mu);
    call->handle = *handle;
    cancel = call->cancel_when_started;
  }
  if (cancel) worker_->Cancel(*handle);
  return *handle;
}

}  // namespace loom
