// Migration plans. A move is carried out as cancel + re-add with recomputation: the
// request leaves its worker (pages freed) and is re-prefilled on the destination over
// prompt + tokens generated so far, so the client sees no token lost or repeated.
//
// Both planners are pure: they read the views and the running requests, update `workers`
// as if the plan were carried out (sources lose load and pages, destinations gain them),
// and return the moves for the caller to execute.
#ifndef LOOM_SCHEDULER_ROUTER_MIGRATION_PLANNER_H_
#define LOOM_SCHEDULER_ROUTER_MIGRATION_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/router/placement_policy.h"
#include "scheduler/router/worker_view.h"

namespace loom {

// A request running on a worker. `request` is its re-add form (context = prompt +
// generated so far, max_new_tokens = what is left). `kv_pages` = pages it holds now.
struct RunningRequest {
  PlacementRequest request;
  int worker_id = 0;
  int32_t kv_pages = 0;
  uint64_t admission_seq = 0;  // order of admission on its worker; smaller = older
};

struct Move {
  uint64_t request_id = 0;
  int from_worker = 0;
  int to_worker = -1;  // -1: no worker can take it now; re-add through Router::Requeue
};

// Moves every request off `draining_worker_id`, oldest first. Destinations come from
// `policy` under the migration watermark (never the draining worker or another draining
// one); a request no worker can take gets to_worker = -1.
std::vector<Move> PlanDrain(int draining_worker_id, absl::Span<const RunningRequest> running,
                            absl::Span<WorkerView> workers, PlacementPolicy& policy);

struct ConsolidationOptions {
  // Only a worker whose load is at most this is emptied (recomputation cost is bounded by
  // this many prefills per plan).
  int max_source_load = 8;
};

// Picks the least-loaded busy worker (load in [1, max_source_load], nothing queued, not
// draining; ties to the HIGHER id, so low ids stay the packed ones) whose every request
// fits on fuller workers: each goes, oldest first, to the Punica choice among the other
// busy workers whose load is at least the source's, under the migration watermark. The
// source can then go idle. If the least-loaded candidate cannot be emptied the next one
// is tried; returns an empty plan when none can.
std::vector<Move> PlanConsolidation(absl::Span<const RunningRequest> running,
                                    absl::Span<WorkerView> workers,
                                    const PlacementOptions& placement,
                                    const ConsolidationOptions& options);

}  // namespace loom

#endif  // LOOM_SCHEDULER_ROUTER_MIGRATION_PLANNER_H_
