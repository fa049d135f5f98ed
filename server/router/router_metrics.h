// The router's Prometheus families, registered on ServerMetrics' registry (one
// exposition with loom_requests_total etc.). Update() sets them from a ClusterStatus;
// call it from the scrape hook.
//
//   loom_worker_up{worker}             gauge   1 when the worker answers and has not failed
//   loom_worker_draining{worker}       gauge   1 while drained
//   loom_worker_idle{worker}           gauge   1 when safe to release (autoscaler)
//   loom_worker_running{worker}        gauge   its running batch (its last load report)
//   loom_worker_queued{worker}         gauge   waiting on the worker
//   loom_worker_assigned{worker}       gauge   requests the router placed there now
//   loom_worker_kv_pages_free{worker}  gauge
//   loom_worker_kv_pages_capacity{worker} gauge
//   loom_router_queued                 gauge   requests in the router's queue
//   loom_router_active_requests        gauge   requests not finished (queued or placed)
//   loom_router_migrations_total       counter cancel + re-add moves (drain, consolidation)
//   loom_router_failovers_total        counter requests re-placed after a worker failed
//   loom_idle_workers                  gauge   workers safe to release
//   loom_router_want_more_workers      gauge   1 when requests wait and none is idle
// The worker label's cardinality is the number of workers ever seen (bounded by the
// deployment).
#ifndef LOOM_SERVER_ROUTER_ROUTER_METRICS_H_
#define LOOM_SERVER_ROUTER_ROUTER_METRICS_H_

#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "scheduler/cluster/cluster_frontend.h"
#include "server/metrics/server_metrics.h"

namespace loom {

class RouterMetrics {
 public:
  explicit RouterMetrics(ServerMetrics* metrics);
  void Update(const ClusterStatus& status);

 private:
  struct PerWorker {
    prometheus::Gauge *up, *draining, *idle, *running, *queued, *assigned, *kv_free, *kv_total;
  };
  PerWorker& Worker(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Gauge>* up_;
  prometheus::Family<prometheus::Gauge>* draining_;
  prometheus::Family<prometheus::Gauge>* idle_;
  prometheus::Family<prometheus::Gauge>* running_;
  prometheus::Family<prometheus::Gauge>* queued_;
  prometheus::Family<prometheus::Gauge>* assigned_;
  prometheus::Family<prometheus::Gauge>* kv_free_;
  prometheus::Family<prometheus::Gauge>* kv_total_;
  prometheus::Gauge* router_queued_;
  prometheus::Gauge* active_;
  prometheus::Counter* migrations_;
  prometheus::Counter* failovers_;
  prometheus::Gauge* idle_workers_;
  prometheus::Gauge* want_more_;

  absl::Mutex mu_;
  std::map<std::string, PerWorker> workers_ ABSL_GUARDED_BY(mu_);
  uint64_t migrations_seen_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failovers_seen_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_ROUTER_METRICS_H_
