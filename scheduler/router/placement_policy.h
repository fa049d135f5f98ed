// Where a new (or re-added) request goes. A policy only chooses; the Router owns the FCFS
// queue and the migration planner decides what moves. Every policy honours the same
// eligibility (not draining, load below max_batch_size, KV room above the watermark), so
// baselines and Punica are compared at the same batch cap.
#ifndef LOOM_SCHEDULER_ROUTER_PLACEMENT_POLICY_H_
#define LOOM_SCHEDULER_ROUTER_PLACEMENT_POLICY_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scheduler/router/worker_view.h"

namespace loom {

// Extra restrictions on which workers may be chosen (migration uses them).
struct Eligibility {
  double kv_free_fraction = 0.0;  // watermark passed to CanAccept
  int exclude_worker_id = -1;     // never choose this worker (the source of a move)
  int min_load = 0;               // only workers whose load() >= min_load
};

class PlacementPolicy {
 public:
  explicit PlacementPolicy(const PlacementOptions& options) : options_(options) {}
  virtual ~PlacementPolicy() = default;

  virtual std::string_view name() const = 0;

  // Index into `workers` of the chosen worker, or -1 when no worker is eligible (the
  // caller queues the request). Deterministic given the same inputs and policy state.
  virtual int Choose(const PlacementRequest& request, absl::Span<const WorkerView> workers,
                     const Eligibility& eligibility) = 0;

  // New placements: Eligibility{options().kv_admit_free_fraction}.
  int ChooseForNew(const PlacementRequest& request, absl::Span<const WorkerView> workers) {
    return Choose(request, workers, Eligibility{options_.kv_admit_free_fraction, -1, 0});
  }

  const PlacementOptions& options() const { return options_; }

 protected:
  bool Eligible(const WorkerView& w, const PlacementRequest& request,
                const Eligibility& e) const {
    return w.id != e.exclude_worker_id && w.load() >= e.min_load &&
           CanAccept(w, request, options_, e.kv_free_fraction);
  }

 private:
  const PlacementOptions options_;
};

// "punica", "round_robin" or "least_loaded". InvalidArgument for any other name or for
// options out of range (max_batch_size < 1, page size < 1, watermarks outside [0, 1)).
absl::StatusOr<std::unique_ptr<PlacementPolicy>> CreatePlacementPolicy(
    std::string_view name, const PlacementOptions& options);

}  // namespace loom

#endif  // LOOM_SCHEDULER_ROUTER_PLACEMENT_POLICY_H_
