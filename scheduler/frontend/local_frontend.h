// LocalFrontend: the Frontend over one Worker in this process (in loomd --role=single
// and `loom generate`, the Engine). Each request gets a ClientStream; the worker's token
// events go through it and come out as StreamEvents. A stream the text layer finishes
// early (a stop string) cancels its worker request at once, so the engine frees its KV
// pages at its next step.
//
// Threads: Submit / Cancel from any thread. Callbacks run on the worker's thread (for
// the engine: its engine thread, or an adapter loader thread), never under a lock of
// this class, so a callback may call Cancel.
#ifndef LOOM_SCHEDULER_FRONTEND_LOCAL_FRONTEND_H_
#define LOOM_SCHEDULER_FRONTEND_LOCAL_FRONTEND_H_

#include <cstdint>

#include "models/tokenizer/tokenizer.h"
#include "scheduler/frontend/frontend.h"
#include "scheduler/worker/worker.h"

namespace loom {

class LocalFrontend final : public Frontend {
 public:
  // `tokenizer` and `worker` must outlive the frontend and every stream it started.
  LocalFrontend(const Tokenizer* tokenizer, Worker* worker)
      : tokenizer_(tokenizer), worker_(worker) {}

  // Ids are the worker's handles. Errors: ClientStream::Create's and Worker::Start's.
  absl::StatusOr<uint64_t> Submit(FrontendRequest request, StreamCallback callback) override;
  void Cancel(uint64_t id) override { worker_->Cancel(id); }

 private:
  struct Call;

  const Tokenizer* const tokenizer_;
  Worker* const worker_;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_FRONTEND_LOCAL_FRONTEND_H_
