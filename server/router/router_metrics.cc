#include "server/router/router_metrics.h"

namespace loom {
namespace {

prometheus::Family<prometheus::Gauge>* GaugeFamily(prometheus::Registry& r, const char* name,
                                                   const char* help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

RouterMetrics::RouterMetrics(ServerMetrics* metrics) {
  prometheus::Registry& r = *metrics->registry();
  up_ = GaugeFamily(r, "loom_worker_up", "1 when the worker answers and has not failed");
  draining_ = GaugeFamily(r, "loom_worker_draining", "1 while the worker is drained");
  idle_ = GaugeFamily(r, "loom_worker_idle", "1 when the worker is idle and may be released");
  running_ = GaugeFamily(r, "loom_worker_running", "Sequences in the worker's running batch");
  queued_ = GaugeFamily(r, "loom_worker_queued", "Requests waiting on the worker");
  assigned_ = GaugeFamily(r, "loom_worker_assigned", "Requests the router placed on the worker");
  kv_free_ = GaugeFamily(r, "loom_worker_kv_pages_free", "Free KV cache pages on the worker");
  kv_total_ = GaugeFamily(r, "loom_worker_kv_pages_capacity", "KV cache pages on the worker");
  router_queued_ = &GaugeFamily(r, "loom_router_queued", "Requests in the router's queue")->Add({});
  active_ = &GaugeFamily(r, "loom_router_active_requests", "Requests queued or placed")->Add({});
  migrations_ = &prometheus::BuildCounter()
                     .Name("loom_router_migrations_total")
                     .Help("Requests moved by cancel + re-add (drain, consolidation)")
                     .Register(r)
                     .Add({});
  failovers_ = &prometheus::BuildCounter()
                    .Name("loom_router_failovers_total")
                    .Help("Requests re-placed because their worker failed")
                    .Register(r)
                    .Add({});
  idle_workers_ = &GaugeFamily(r, "loom_idle_workers", "Workers safe to release")->Add({});
  want_more_ = &GaugeFamily(r, "loom_router_want_more_workers",
                            "1 when requests wait and no worker is idle")->Add({});
}

RouterMetrics::PerWorker& RouterMetrics::Worker(const std::string& name) {
  auto it = workers_.find(name);
  if (it != workers_.end()) return it->second;
  const std::map<std::string, std::string> label = {{"worker", name}};
  PerWorker w{&up_->Add(label),      &draining_->Add(label), &idle_->Add(label),
              &running_->Add(label), &queued_->Add(label),   &assigned_->Add(label),
              &kv_free_->Add(label), &kv_total_->Add(label)};
  return workers_.emplace(name, w).first->second;
}

void RouterMetrics::Update(const ClusterStatus& s) {
  absl::MutexLock l(&mu_);
  for (const ClusterWorkerStatus& w : s.workers) {
    PerWorker& g = Worker(w.name);
    g.up->Set(w.up ? 1 : 0);
    g.draining->Set(w.draining ? 1 : 0);
    g.idle->Set(w.idle ? 1 : 0);
    g.running->Set(w.load.running);
    g.queued->Set(w.load.queued);
    g.assigned->Set(w.assigned);
    g.kv_free->Set(w.load.kv_pages_free);
    g.kv_total->Set(w.load.kv_pages_total);
  }
  router_queued_->Set(static_cast<double>(s.queued));
  active_->Set(s.active);
  if (s.migrations > migrations_seen_) {
    migrations_->Increment(static_cast<double>(s.migrations - migrations_seen_));
    migrations_seen_ = s.migrations;
  }
  if (s.failovers > failovers_seen_) {
    failovers_->Increment(static_cast<double>(s.failovers - failovers_seen_));
    failovers_seen_ = s.failovers;
  }
  idle_workers_->Set(static_cast<double>(s.idle_workers.size()));
  want_more_->Set(s.want_more ? 1 : 0);
}

}  // namespace loom
