#include "scheduler/router/router.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace loom {

Router::Router(std::unique_ptr<PlacementPolicy> policy, const RouterOptions& options)
    : policy_(std::move(policy)), options_(options) {}

absl::StatusOr<std::optional<int>> Router::Submit(const PlacementRequest& request,
                                                  absl::Span<WorkerView> workers) {
  if (request.context_tokens < 1 || request.max_new_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request.id, ": context_tokens must be >= 1 and max_new_tokens >= 0, got ",
        request.context_tokens, " and ", request.max_new_tokens));
  }
  if (queue_.empty()) {
    const int index = policy_->ChooseForNew(request, workers);
    if (index >= 0) {
      ApplyAssignment(request, policy_->options(), &workers[index]);
      return std::optional<int>(workers[index].id);
    }
  }
  if (queue_.size() >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrCat("router queue full (", options_.max_queued, " requests waiting)"));
  }
  queue_.push_back(request);
  return std::optional<int>();
}

void Router::Requeue(const PlacementRequest& request) { queue_.push_front(request); }

std::vector<Assignment> Router::DrainQueue(absl::Span<WorkerView> workers) {
  std::vector<Assignment> out;
  while (!queue_.empty()) {
    const PlacementRequest& head = queue_.front();
    const int index = policy_->ChooseForNew(head, workers);
    if (index < 0) break;
    ApplyAssignment(head, policy_->options(), &workers[index]);
    out.push_back({head.id, workers[index].id});
    queue_.pop_front();
  }
  return out;
}

bool Router::CancelQueued(uint64_t request_id) {
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [&](const PlacementRequest& r) { return r.id == request_id; });
  if (it == queue_.end()) return false;
  queue_.erase(it);
  return true;
}

ScaleSignals ComputeScaleSignals(absl::Span<const WorkerView> workers, size_t queued,
                                 int64_t now_us, int64_t idle_grace_us) {
  ScaleSignals s;
  s.queued = queued;
  bool any_idle = false;
  for (const WorkerView& w : workers) {
    const bool idle = !w.draining && w.load() == 0 && w.idle_since_us >= 0;
    if (!idle) continue;
    any_idle = true;
    if (queued == 0 && now_us - w.idle_since_us >= idle_grace_us) {
      s.idle_workers.push_back(w.id);
    }
  }
  std::sort(s.idle_workers.begin(), s.idle_workers.end());
  s.want_more = queued > 0 && !any_idle;
  return s;
}

}  // namespace loom
