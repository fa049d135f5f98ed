// FakeWorker: a Worker for tests. A step thread emits one token per step to each running
// request; the token is a deterministic function of (adapter, context) — like a greedy
// model — so a request re-placed with context = prompt + generated continues exactly as
// it would have. Failures are injected by hand: Kill (the worker dies: streams end
// UNAVAILABLE, Load and Start fail), AbortAll (the worker drops its requests: ABORTED),
// a per-request stall point, and tokens leaked after a Cancel (which the frontend must
// drop).
#ifndef LOOM_SCHEDULER_WORKER_FAKE_WORKER_H_
#define LOOM_SCHEDULER_WORKER_FAKE_WORKER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/worker/worker.h"

namespace loom {

class FakeWorker final : public Worker {
 public:
  struct Options {
    std::string name = "fake:0";
    int max_running = 64;          // more started requests wait (reported as queued)
    int32_t kv_pages_total = 4096;
    int32_t kv_page_size = 16;
    absl::Duration step = absl::Milliseconds(1);
    int32_t eos_id = -1;           // emitted when NextToken's hash says so (if >= 0)
    // A request stops emitting once generated_before + emitted reaches this (until
    // Unstall); -1 = never.
    int stall_at = -1;
    // On Cancel, emit one more token before the final kCancelled event.
    bool leak_after_cancel = false;
  };

  explicit FakeWorker(Options options);
  ~FakeWorker() override;

  // The token after `context` for `adapter`: a letter of "abcdefgh" or a space, as the
  // byte-level test vocabulary's id (2 + byte), or eos_id about 1 time in 40 when set.
  static int32_t NextToken(const std::string& adapter, const std::vector<int32_t>& context,
                           int32_t eos_id);

  const std::string& name() const override { return options_.name; }
  absl::StatusOr<uint64_t> Start(WorkerRequest request, WorkerCallback callback) override;
  void Cancel(uint64_t handle) override;
  absl::StatusOr<WorkerLoad> Load() override;

  void Kill();
  void AbortAll();
  void Unstall();
  // Reports WorkerLoad::draining (a graceful shutdown); Start fails UNAVAILABLE then.
  void SetDraining(bool draining);

  // Observations for tests.
  int active() const;                     // started, not finished
  int max_active_running() const;         // most requests running at once
  std::vector<WorkerRequest> started() const;  // every request Start accepted, in order

 private:
  struct Stream {
    uint64_t handle;
    WorkerRequest request;
    WorkerCallback callback;
    int emitted = 0;
    bool cancelled = false;
    bool done = false;
  };
  void Loop();

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerRequest> started_ ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stalled_ ABSL_GUARDED_BY(mu_) = true;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int max_running_seen_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_WORKER_FAKE_WORKER_H_
