// Baseline: the eligible worker with the SMALLEST load (running + queued); ties go to a
// worker holding the request's adapter, then to the lower id. Spreads load evenly, which
// keeps batches small (low latency) and every worker busy (many worker-seconds).
#ifndef LOOM_SCHEDULER_ROUTER_LEAST_LOADED_POLICY_H_
#define LOOM_SCHEDULER_ROUTER_LEAST_LOADED_POLICY_H_

#include "scheduler/router/placement_policy.h"

namespace loom {

class LeastLoadedPolicy : public PlacementPolicy {
 public:
  using PlacementPolicy::PlacementPolicy;
  std::string_view name() const override { return "least_loaded"; }
  int Choose(const PlacementRequest& request, absl::Span<const WorkerView> workers,
             const Eligibility& eligibility) override;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_ROUTER_LEAST_LOADED_POLICY_H_
