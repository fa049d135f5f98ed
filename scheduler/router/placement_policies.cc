// The three placement policies and their factory. Each Choose is one pass over the
// workers comparing a key; the key order is the policy.
#include <tuple>

#include "absl/strings/str_cat.h"
#include "scheduler/router/least_loaded_policy.h"
#include "scheduler/router/punica_policy.h"
#include "scheduler/router/round_robin_policy.h"

namespace loom {
namespace {

// Lexicographic "better than" over keys; returns the index of the best eligible worker.
template <typename KeyFn, typename EligibleFn>
int ArgBest(absl::Span<const WorkerView> workers, KeyFn key, EligibleFn eligible) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    if (!eligible(workers[i])) continue;
    if (best < 0 || key(workers[i]) > key(workers[best])) best = i;
  }
  return best;
}

}  // namespace

int PunicaPolicy::Choose(const PlacementRequest& request, absl::Span<const WorkerView> workers,
                         const Eligibility& e) {
  // Larger load, then adapter resident, then lower id.
  return ArgBest(
      workers,
      [&](const WorkerView& w) {
        return std::make_tuple(w.load(), w.HasAdapter(request.adapter_id) ? 1 : 0, -w.id);
      },
      [&](const WorkerView& w) { return Eligible(w, request, e); });
}

int LeastLoadedPolicy::Choose(const PlacementRequest& request,
                              absl::Span<const WorkerView> workers, const Eligibility& e) {
  // Smaller load, then adapter resident, then lower id.
  return ArgBest(
      workers,
      [&](const WorkerView& w) {
        return std::make_tuple(-w.load(), w.HasAdapter(request.adapter_id) ? 1 : 0, -w.id);
      },
      [&](const WorkerView& w) { return Eligible(w, request, e); });
}

int RoundRobinPolicy::Choose(const PlacementRequest& request,
                             absl::Span<const WorkerView> workers, const Eligibility& e) {
  // First eligible id above last_id_, else (wrapping) the smallest eligible id.
  int above = -1, lowest = -1;
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    const WorkerView& w = workers[i];
    if (!Eligible(w, request, e)) continue;
    if (w.id > last_id_ && (above < 0 || w.id < workers[above].id)) above = i;
    if (lowest < 0 || w.id < workers[lowest].id) lowest = i;
  }
  const int chosen = above >= 0 ? above : lowest;
  if (chosen >= 0) last_id_ = workers[chosen].id;
  return chosen;
}

absl::StatusOr<std::unique_ptr<PlacementPolicy>> CreatePlacementPolicy(
    std::string_view name, const PlacementOptions& options) {
  if (options.max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size must be >= 1, got ", options.max_batch_size));
  }
  if (options.kv_page_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_page_size must be >= 1, got ", options.kv_page_size));
  }
  for (double f : {options.kv_admit_free_fraction, options.kv_migrate_free_fraction}) {
    if (!(f >= 0.0 && f < 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV watermarks must be in [0, 1), got ", f));
    }
  }
  if (name == "punica") return std::make_unique<PunicaPolicy>(options);
  if (name == "round_robin") return std::make_unique<RoundRobinPolicy>(options);
  if (name == "least_loaded") return std::make_unique<LeastLoadedPolicy>(options);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown placement policy '", std::string(name), "' (expected punica, round_robin, least_loaded)"));
}

}  // namespace loom
