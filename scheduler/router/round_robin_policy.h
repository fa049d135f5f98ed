// Baseline: cycles through workers in id order, starting after the id it chose last, and
// takes the first eligible one (ineligible workers are skipped, not waited for). Ignores
// load and adapter residency.
#ifndef LOOM_SCHEDULER_ROUTER_ROUND_ROBIN_POLICY_H_
#define LOOM_SCHEDULER_ROUTER_ROUND_ROBIN_POLICY_H_

#include "scheduler/router/placement_policy.h"

namespace loom {

class RoundRobinPolicy : public PlacementPolicy {
 public:
  using PlacementPolicy::PlacementPolicy;
  std::string_view name() const override { return "round_robin"; }
  int Choose(const PlacementRequest& request, absl::Span<const WorkerView> workers,
             const Eligibility& eligibility) override;

 private:
  int last_id_ = -1;  // id chosen last; the next search starts above it
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_ROUTER_ROUND_ROBIN_POLICY_H_
