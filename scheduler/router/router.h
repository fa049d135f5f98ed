// The cluster router's core: placement through a PlacementPolicy, and a FCFS queue for
// requests no worker can take yet. Pure and deterministic: it owns no clock, thread or
// transport; callers pass the current worker views and apply the assignments it returns
// (loomd over in-process or remote workers; the simulator over modelled ones).
//
// Thread safety: none; one owner (the router thread, or the simulator loop).
#ifndef LOOM_SCHEDULER_ROUTER_ROUTER_H_
#define LOOM_SCHEDULER_ROUTER_ROUTER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scheduler/router/placement_policy.h"
#include "scheduler/router/worker_view.h"

namespace loom {

struct RouterOptions {
  size_t max_queued = size_t{1} << 20;  // FCFS queue bound; beyond: ResourceExhausted
};

struct Assignment {
  uint64_t request_id = 0;
  int worker_id = 0;
};

class Router {
 public:
  // `policy` must not be null.
  Router(std::unique_ptr<PlacementPolicy> policy, const RouterOptions& options);

  // Places `request` on a worker (returns its id) or appends it to the FCFS queue
  // (returns nullopt). While the queue is non-empty a new request queues behind it: no
  // overtaking. On placement `workers` is updated with ApplyAssignment. Errors:
  // InvalidArgument (context_tokens < 1 or max_new_tokens < 0), ResourceExhausted
  // (queue full; nothing queued).
  absl::StatusOr<std::optional<int>> Submit(const PlacementRequest& request,
                                            absl::Span<WorkerView> workers);

  // Re-adds a request cancelled off a worker (KV eviction, or a migration that found no
  // destination) at the FRONT of the queue: it was admitted before everything waiting.
  // Call DrainQueue afterwards. Never refused (it already held a slot).
  void Requeue(const PlacementRequest& request);

  // Places queued requests in FCFS order while the head finds a worker; stops at the first
  // head that does not (strict FCFS). `workers` is updated for each assignment, in order.
  std::vector<Assignment> DrainQueue(absl::Span<WorkerView> workers);

  // Removes a queued request (client cancelled). Returns false if it is not queued.
  bool CancelQueued(uint64_t request_id);

  size_t queued() const { return queue_.size(); }
  PlacementPolicy& policy() { return *policy_; }
  const PlacementOptions& placement_options() const { return policy_->options(); }

 private:
  const std::unique_ptr<PlacementPolicy> policy_;
  const RouterOptions options_;
  std::deque<PlacementRequest> queue_;
};

// Scale signals for an autoscaler.
struct ScaleSignals {
  // Workers that hold no request, are not draining, and have been idle for at least
  // `idle_grace_us` at `now_us`: safe to release. Empty while requests wait in the queue
  // (an idle worker that could take them is not surplus). Ascending id order.
  std::vector<int> idle_workers;
  size_t queued = 0;          // requests waiting in the router's queue
  bool want_more = false;     // requests are queued and no non-draining worker is idle
};

ScaleSignals ComputeScaleSignals(absl::Span<const WorkerView> workers, size_t queued,
                                 int64_t now_us, int64_t idle_grace_us);

}  // namespace loom

#endif  // LOOM_SCHEDULER_ROUTER_ROUTER_H_
