// AdapterManager: the serving layer's view of adapters. Admin loads (path checked against
// the adapter roots, loaded on the loader thread), on-demand loads for requests that name
// an id not loaded yet but present under a root (LoRAX-style; switchable off; at most
// Options::max_on_demand_loads distinct ids queued or running at once), unloads, and
// publishing adapter states to the metrics. Thread-safe.
#ifndef LOOM_SERVER_ADAPTER_MANAGER_H_
#define LOOM_SERVER_ADAPTER_MANAGER_H_

#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/lora/adapter_store.h"
#include "server/adapter_roots.h"
#include "server/loader_thread.h"
#include "server/metrics/server_metrics.h"

namespace loom {

class AdapterManager {
 public:
  struct Options {
    bool on_demand = true;        // load unknown ids found under a root
    int max_on_demand_loads = 4;  // distinct on-demand loads queued or running at once
  };
  // `store` (and `metrics`, may be null) must outlive this.
  AdapterManager(AdapterStore* store, AdapterRoots roots, Options options,
                 ServerMetrics* metrics);
  ~AdapterManager();  // stops the loader thread after its queued loads

  // Loads (or replaces) `id` from `source` on the calling thread. InvalidArgument (bad id),
  // PermissionDenied (outside the roots), NotFound (no such path), FailedPrecondition (a
  // malformed adapter or one that does not fit the base model: the reason),
  // ResourceExhausted (no room in the budget).
  absl::StatusOr<AdapterInfo> Load(const std::string& id, const std::string& source,
                                   bool pin);
  // Load on the loader thread; `done` runs there.
  void LoadAsync(const std::string& id, const std::string& source, bool pin,
                 std::function<void(absl::StatusOr<AdapterInfo>)> done);

  // Before a request naming `id` is submitted: `done(OK)` at once, on this thread, when
  // the store has `id` READY or FAILED (the engine reports failures). While `id` is
  // LOADING, `done` runs on the loader thread once that load has ended (OK when READY). Otherwise,
  // with on-demand loading on and <root>/<id> or <root>/<id>.gguf present, loads it on
  // the loader thread and calls `done` there with the load's status. Else NotFound. A
  // request for an id whose on-demand load is queued waits for that load; one that would
  // queue a load beyond Options::max_on_demand_loads gets ResourceExhausted at once.
  void EnsureKnownAsync(const std::string& id, std::function<void(absl::Status)> done);

  // Unloads `id` (drains); returns the requests still using it. NotFound if unknown.
  absl::StatusOr<int> Unload(const std::string& id);

  AdapterStore* store() const { return store_; }
  const AdapterRoots& roots() const { return roots_; }
  bool on_demand() const { return options_.on_demand; }
  // On-demand loads queued or running now.
  int on_demand_loads_in_flight() const;
  void PublishStates();

 private:
  // On the loader thread: waits (at most kLoadWait) while `id` is LOADING; OK once READY.
  absl::Status AwaitLoad(const std::string& id);
  static constexpr absl::Duration kLoadWait = absl::Seconds(60);

  AdapterStore* const store_;
  const AdapterRoots roots_;
  const Options options_;
  ServerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  std::set<std::string> on_demand_ids_ ABSL_GUARDED_BY(mu_);  // queued or running
  LoaderThread loader_;  // declared last: stopped (its queue run) before the rest goes
};

}  // namespace loom

#endif  // LOOM_SERVER_ADAPTER_MANAGER_H_
