// ClusterFrontend: the router role's core. It owns a set of Workers (by name), a Router
// (scheduler/router: placement policy + FCFS queue) and ONE control thread that owns all
// request and worker state. It is the Frontend (scheduler/frontend/frontend.h) of the
// router role: it turns client requests into worker placements, and keeps each client
// stream whole while requests move:
//
//  * Placement: Router::Submit / DrainQueue over WorkerViews refreshed every tick from
//    Worker::Load() and updated locally for every placement in between.
//  * Failover: a request whose stream ends kUnavailable / kAborted, or whose Start()
//    fails so, is re-placed (Router::Requeue, front of the queue) with context = prompt
//    + tokens generated so far, generated_before = that count, max_new_tokens = what is
//    left; after kUnavailable nothing new goes to that worker for failure_backoff. A
//    worker whose Load() fails (missed heartbeats) has every request re-placed.
//  * Migration (cancel + re-add with recomputation): drain(worker) moves every request
//    off it (PlanDrain) and places nothing more there; with the Punica policy the
//    frontend periodically consolidates (PlanConsolidation) so lightly loaded workers
//    empty out and can be released.
//  * No token lost or repeated: every placement has an epoch; worker events carry the
//    epoch they were started with and events of an older placement (tokens a cancelled
//    worker still sends, its final kCancelled event) are dropped. The detokenizer and
//    stop checker (ClientStream) never leave the frontend.
//
// Threads: Submit/Cancel/Drain/AddWorker/GetStatus may be called from any thread; they
// post to the control thread's inbox (or read its published snapshot). Worker callbacks
// post too. Client callbacks run on the control thread and must not block.
#ifndef LOOM_SCHEDULER_CLUSTER_CLUSTER_FRONTEND_H_
#define LOOM_SCHEDULER_CLUSTER_CLUSTER_FRONTEND_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/worker/worker.h"
#include "scheduler/frontend/frontend.h"
#include "scheduler/router/migration_planner.h"
#include "scheduler/router/router.h"

namespace loom {

struct ClusterOptions {
  std::string policy = "punica";      // "punica" | "round_robin" | "least_loaded"
  PlacementOptions placement;         // max_batch_size etc.; see worker_view.h
  size_t max_queued = 4096;           // router queue bound; beyond: ResourceExhausted
  absl::Duration tick = absl::Milliseconds(50);  // load refresh / deadlines / plans
  // Punica consolidation (only with policy "punica"): how often a plan is made;
  // ZeroDuration() = never.
  absl::Duration consolidation_interval = absl::Seconds(1);
  ConsolidationOptions consolidation;
  // A worker idle this long is reported in ClusterStatus::idle_workers.
  absl::Duration idle_grace = absl::Seconds(30);
  // After a worker failed (Unavailable), nothing is placed on it for this long even if
  // its Load() still answers (a heartbeat may lag the failure).
  absl::Duration failure_backoff = absl::Seconds(2);
  // A request re-placed more often than this ends with UNAVAILABLE.
  int max_replacements = 16;
};

// One worker as GetStatus and /metrics show it.
struct ClusterWorkerStatus {
  std::string name;
  bool up = false;            // Load() answered at the last tick and no recent failure
  bool draining = false;      // drained (Drain) or shutting down (WorkerLoad::draining)
  bool idle = false;          // up, not draining, no request, idle >= idle_grace
  int assigned = 0;           // requests the frontend has placed on it now
  WorkerLoad load;            // the last successful Load()
};

struct ClusterStatus {
  std::vector<ClusterWorkerStatus> workers;  // in AddWorker order
  size_t queued = 0;          // requests waiting in the router's queue
  int active = 0;             // requests not yet finished (queued or placed)
  uint64_t migrations = 0;    // cancel + re-add moves (drain, consolidation)
  uint64_t failovers = 0;     // requests re-placed because their worker failed
  uint64_t completed = 0;     // requests finished (any outcome)
  std::vector<std::string> idle_workers;  // ComputeScaleSignals: safe to release
  bool want_more = false;     // requests wait and no worker is idle
  // Distinct adapter ids of placed / queued requests, sorted (the base model omitted).
  std::vector<std::string> running_adapters;
  std::vector<std::string> waiting_adapters;
};

class ClusterFrontend final : public Frontend {
 public:
  // `tokenizer` must outlive the frontend. InvalidArgument for a bad policy / options.
  static absl::StatusOr<std::unique_ptr<ClusterFrontend>> Create(const Tokenizer* tokenizer,
                                                                 const ClusterOptions& options);
  ~ClusterFrontend() override;  // Shutdown(ZeroDuration()) then joins

  // Adds a worker; AlreadyExists if its name is taken. Usable at once.
  absl::Status AddWorker(std::unique_ptr<Worker> worker);
  bool HasWorker(const std::string& name) const;

  // Queues a request; returns its id. Errors (nothing queued): InvalidArgument (a bad
  // stop string, ClientStream::Create), Unavailable (shutting down). Then `callback`
  // receives every event and exactly one final event (errors from workers, e.g.
  // NOT_FOUND for an unknown adapter, arrive as the final event's error).
  absl::StatusOr<uint64_t> Submit(FrontendRequest request, StreamCallback callback) override;

  // Ends a request (final event with CANCELLED); no-op when done or unknown.
  void Cancel(uint64_t id) override;

  // Stops placing on `worker` and moves its requests elsewhere (or to the queue).
  // NotFound for an unknown name. `undrain` = true makes it placeable again.
  absl::Status Drain(const std::string& worker, bool undrain = false);

  // The state published after the last control-thread iteration.
  ClusterStatus GetStatus() const;

  // Stops accepting; lets requests finish for up to `grace`, then ends the rest with
  // UNAVAILABLE; returns when none is left.
  void Shutdown(absl::Duration grace);

 private:
  struct Request;
  struct WorkerSlot;
  struct InboxItem;

  ClusterFrontend(const Tokenizer* tokenizer, const ClusterOptions& options,
                  std::unique_ptr<Router> router);

  void Post(InboxItem item);
  void Loop();
  // Control-thread helpers.
  void Process(InboxItem& item);
  void OnWorkerEvent(uint64_t id, uint64_t epoch, const WorkerEvent& event);
  void Tick(absl::Time now);
  void RefreshViews(absl::Time now);
  void PlaceQueued();
  void PlaceNew(Request* r);
  void StartOn(Request* r, int worker);
  void Detach(Request* r);                     // cancels its placement, if any
  void Replace(Request* r, bool failover);     // detach + requeue at the front
  // Lost worker (Load() failed): everything on it is re-placed.
  void FailWorker(int worker, absl::Time now);
  // No new placement on `worker` for failure_backoff.
  void Suspect(int worker, absl::Time now);
  void Move(const loom::Move& m, bool failover);
  void End(Request* r, StreamEvent final_event);
  std::vector<RunningRequest> RunningOn(int worker_or_all) const;
  PlacementRequest ReAddForm(const Request& r) const;
  std::vector<WorkerView> UpViews();
  void WriteBackViews(const std::vector<WorkerView>& views);
  void Publish(absl::Time now);

  const Tokenizer* const tokenizer_;
  const ClusterOptions options_;

  // Owned by the control thread.
  std::unique_ptr<Router> router_;
  std::vector<std::unique_ptr<WorkerSlot>> workers_;
  std::map<uint64_t, std::unique_ptr<Request>> requests_;
  uint64_t admission_counter_ = 0;
  absl::Time next_tick_ = absl::InfinitePast();
  absl::Time next_consolidation_ = absl::InfinitePast();
  uint64_t migrations_ = 0, failovers_ = 0, completed_ = 0;

  mutable absl::Mutex mu_;
  std::deque<InboxItem> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time hard_stop_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  ClusterStatus status_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_CLUSTER_CLUSTER_FRONTEND_H_
