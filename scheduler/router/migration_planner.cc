#include "scheduler/router/migration_planner.h"

#include <algorithm>
#include <tuple>

#include "scheduler/router/punica_policy.h"

namespace loom {
namespace {

int IndexOf(absl::Span<const WorkerView> workers, int id) {
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    if (workers[i].id == id) return i;
  }
  return -1;
}

// The requests running on `worker_id`, oldest first.
std::vector<const RunningRequest*> OnWorker(absl::Span<const RunningRequest> running,
                                            int worker_id) {
  std::vector<const RunningRequest*> out;
  for (const RunningRequest& r : running) {
    if (r.worker_id == worker_id) out.push_back(&r);
  }
  std::sort(out.begin(), out.end(), [](const RunningRequest* a, const RunningRequest* b) {
    return std::tie(a->admission_seq, a->request.id) <
           std::tie(b->admission_seq, b->request.id);
  });
  return out;
}

// Source side of a move in the views.
void Release(const RunningRequest& r, WorkerView* source) {
  source->running = std::max(source->running - 1, 0);
  source->kv_pages_free += r.kv_pages;
}

}  // namespace

std::vector<Move> PlanDrain(int draining_worker_id, absl::Span<const RunningRequest> running,
                            absl::Span<WorkerView> workers, PlacementPolicy& policy) {
  std::vector<Move> moves;
  const int source = IndexOf(workers, draining_worker_id);
  const Eligibility e{policy.options().kv_migrate_free_fraction, draining_worker_id, 0};
  for (const RunningRequest* r : OnWorker(running, draining_worker_id)) {
    const int dest = policy.Choose(r->request, workers, e);
    if (dest >= 0) ApplyAssignment(r->request, policy.options(), &workers[dest]);
    if (source >= 0) Release(*r, &workers[source]);
    moves.push_back({r->request.id, draining_worker_id, dest >= 0 ? workers[dest].id : -1});
  }
  return moves;
}

std::vector<Move> PlanConsolidation(absl::Span<const RunningRequest> running,
                                    absl::Span<WorkerView> workers,
                                    const PlacementOptions& placement,
                                    const ConsolidationOptions& options) {
  std::vector<int> candidates;
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    const WorkerView& w = workers[i];
    if (!w.draining && w.queued == 0 && w.running >= 1 &&
        w.running <= options.max_source_load) {
      candidates.push_back(i);
    }
  }
  std::sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    return std::make_tuple(workers[a].load(), -workers[a].id) <
           std::make_tuple(workers[b].load(), -workers[b].id);
  });
  PunicaPolicy punica(placement);
  for (int source : candidates) {
    const int source_id = workers[source].id;
    const Eligibility e{placement.kv_migrate_free_fraction, source_id,
                        std::max(workers[source].load(), 1)};
    std::vector<WorkerView> trial(workers.begin(), workers.end());
    std::vector<Move> moves;
    bool all_fit = true;
    for (const RunningRequest* r : OnWorker(running, source_id)) {
      const int dest = punica.Choose(r->request, trial, e);
      if (dest < 0) {
        all_fit = false;
        break;
      }
      ApplyAssignment(r->request, placement, &trial[dest]);
      Release(*r, &trial[source]);
      moves.push_back({r->request.id, source_id, trial[dest].id});
    }
    if (!all_fit || moves.empty()) continue;
    std::copy(trial.begin(), trial.end(), workers.begin());
    return moves;
  }
  return {};
}

}  // namespace loom
