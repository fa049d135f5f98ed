// What the router knows about one worker, and what it knows about one request. Plain
// values: the router is pure and deterministic over them (no clock, no transport), so the
// same code runs inside loomd and inside the discrete-event simulator (scheduler/sim).
#ifndef LOOM_SCHEDULER_ROUTER_WORKER_VIEW_H_
#define LOOM_SCHEDULER_ROUTER_WORKER_VIEW_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct WorkerView {
  int id = 0;                       // unique; ties between workers go to the lower id
  int running = 0;                  // requests in the worker's running batch
  int queued = 0;                   // assigned to the worker but not yet running there
  int32_t kv_pages_free = 0;
  int32_t kv_pages_total = 0;
  std::vector<std::string> resident_adapters;  // sorted ascending, unique
  bool draining = false;            // accepts nothing; its requests are to be moved off
  int64_t idle_since_us = -1;       // caller's clock; < 0 while the worker holds requests

  // Batch size the worker is committed to: running + queued.
  int load() const { return running + queued; }
  bool HasAdapter(std::string_view adapter_id) const;
  // Inserts keeping `resident_adapters` sorted and unique.
  void AddAdapter(std::string_view adapter_id);
};

// A request as the router sees it. For a re-add (eviction or migration: cancel + re-add
// with recomputation), `context_tokens` = prompt + tokens generated so far, and
// `max_new_tokens` = what is left to generate.
struct PlacementRequest {
  uint64_t id = 0;
  std::string adapter_id;           // "" = the base model
  int context_tokens = 0;           // tokens to prefill on the chosen worker (> 0)
  int max_new_tokens = 0;           // tokens still to generate (>= 0)
};

struct PlacementOptions {
  int max_batch_size = 32;          // Punica's batch cap; a worker at this load is full
  int kv_page_size = 16;
  // When true a request needs pages for context + max_new_tokens (no eviction ever);
  // when false (Punica, the engine) only for context + 1, and the worker evicts the
  // newest request if decode later runs out of pages.
  bool reserve_max_new_tokens = false;
  // Low KV watermark for new placements: after taking the request, at least this
  // fraction of the worker's pages must still be free. In [0, 1).
  double kv_admit_free_fraction = 0.0;
  // Stricter watermark for migration destinations (consolidation and drain), so moving
  // load does not push a worker straight into eviction. In [0, 1).
  double kv_migrate_free_fraction = 0.10;
};

// KV pages the request needs on a worker under `options`.
int32_t PagesNeeded(const PlacementRequest& request, const PlacementOptions& options);

// True when `worker` is not draining, is below the batch cap, and keeps at least
// `free_fraction` of its pages free after reserving PagesNeeded(request).
bool CanAccept(const WorkerView& worker, const PlacementRequest& request,
               const PlacementOptions& options, double free_fraction);

// Updates `worker` as if `request` had just been assigned to it: queued + 1 (the caller's
// next refresh moves it to running), pages reserved, adapter resident.
void ApplyAssignment(const PlacementRequest& request, const PlacementOptions& options,
                     WorkerView* worker);

}  // namespace loom

#endif  // LOOM_SCHEDULER_ROUTER_WORKER_VIEW_H_
