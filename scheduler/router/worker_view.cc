#include "scheduler/router/worker_view.h"

#include <algorithm>
#include <cmath>

namespace loom {

bool WorkerView::HasAdapter(std::string_view adapter_id) const {
  return std::binary_search(resident_adapters.begin(), resident_adapters.end(), adapter_id,
                            [](std::string_view a, std::string_view b) { return a < b; });
}

void WorkerView::AddAdapter(std::string_view adapter_id) {
  auto it = std::lower_bound(resident_adapters.begin(), resident_adapters.end(), adapter_id,
                             [](const std::string& a, std::string_view b) { return a < b; });
  if (it != resident_adapters.end() && *it == adapter_id) return;
  resident_adapters.insert(it, std::string(adapter_id));
}

int32_t PagesNeeded(const PlacementRequest& request, const PlacementOptions& options) {
  const int64_t tokens = int64_t{std::max(request.context_tokens, 0)} +
                         (options.reserve_max_new_tokens
                              ? int64_t{std::max(request.max_new_tokens, 0)}
                              : int64_t{1});
  const int page = std::max(options.kv_page_size, 1);
  return static_cast<int32_t>((tokens + page - 1) / page);
}

bool CanAccept(const WorkerView& worker, const PlacementRequest& request,
               const PlacementOptions& options, double free_fraction) {
  if (worker.draining) return false;
  if (worker.load() >= options.max_batch_size) return false;
  const int64_t left = int64_t{worker.kv_pages_free} - PagesNeeded(request, options);
  if (left < 0) return false;
  // Integer-exact watermark: left >= ceil(free_fraction * total).
  const int64_t keep =
      static_cast<int64_t>(std::ceil(free_fraction * static_cast<double>(worker.kv_pages_total)));
  return left >= keep;
}

void ApplyAssignment(const PlacementRequest& request, const PlacementOptions& options,
                     WorkerView* worker) {
  worker->queued += 1;
  worker->kv_pages_free -= PagesNeeded(request, options);
  worker->idle_since_us = -1;
  worker->AddAdapter(request.adapter_id);
}

}  // namespace loom
