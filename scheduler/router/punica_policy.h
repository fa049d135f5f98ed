// Punica's consolidating placement (MLSys'24, section 5): the eligible worker with the
// LARGEST load (running + queued), i.e. the fullest batch still below max_batch_size with
// KV room; among equal loads a worker that already holds the request's adapter wins, then
// the lower id. Idle workers are chosen last, so load packs onto few workers and the rest
// can go idle and be released.
#ifndef LOOM_SCHEDULER_ROUTER_PUNICA_POLICY_H_
#define LOOM_SCHEDULER_ROUTER_PUNICA_POLICY_H_

#include "scheduler/router/placement_policy.h"

namespace loom {

class PunicaPolicy : public PlacementPolicy {
 public:
  using PlacementPolicy::PlacementPolicy;
  std::string_view name() const override { return "punica"; }
  int Choose(const PlacementRequest& request, absl::Span<const WorkerView> workers,
             const Eligibility& eligibility) override;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_ROUTER_PUNICA_POLICY_H_
