// ServerMetrics: every Prometheus metric `loomd` exports, in one prometheus::Registry.
// Handles are resolved once at construction; the only label resolved per call is the
// capped `adapter` label of loom_requests_total (a small cache, see "Adapter label").
//
// How loomd wires it (all methods are thread-safe):
//
//   ServerMetrics metrics;                       // or ServerMetrics(options)
//   Engine engine(..., /*observer=*/metrics.observer());   // engine-thread hooks
//   HttpEndpoint http;                           // server/metrics/http_endpoint.h
//   RETURN_IF_ERROR(http.Start("0.0.0.0", 9400, &metrics));
//   ... load the model ...
//   metrics.SetReady(true);                      // /healthz and /readyz turn 200
//   // gRPC handler, once per finished RPC (any outcome, including rejected ones):
//   metrics.RecordRequest(adapter_id, status.error_code());   // "" = base model
//   // after every adapter Register/Unload/Pin/eviction, or on a timer:
//   metrics.SetAdapterStates(store.List());
//   metrics.ObserveAdapterLoad(seconds, status.ok());           // each adapter load
//   // Refresh snapshot gauges at every scrape. NEEDED for the KV gauges: the engine
//   // calls OnStep only after a forward step, so pages freed by a cancel or a finish
//   // while the engine then goes idle would otherwise stay stale in /metrics.
//   metrics.SetScrapeHook([&] {
//     metrics.SetEngineStats(engine.GetStats());
//     metrics.SetAdapterStates(store.List());
//   });
//
// Metric names (all prefixed loom_, lint-clean under `promtool check metrics`):
//   loom_requests_total{adapter,code}        counter   RecordRequest. code = gRPC code
//                                                      name ("OK", "CANCELLED", ...).
//   loom_time_to_first_token_seconds         histogram OnFirstToken
//   loom_inter_token_latency_seconds         histogram OnToken
//   loom_request_duration_seconds            histogram OnFinish (end to end, every
//                                                      finished request, any status)
//   loom_prompt_tokens_total                 counter   OnFinish
//   loom_generation_tokens_total             counter   OnFinish
//   loom_requests_running / _waiting         gauge     OnStep, SetEngineStats
//   loom_batch_tokens / loom_batch_sequences gauge     OnStep (last step)
//   loom_step_tokens                         histogram OnStep (tokens per forward step;
//                                                      its _count is the step count)
//   loom_kv_cache_pages_used / _capacity     gauge     OnStep, SetEngineStats (pages in
//                                                      use / in the pool)
//   loom_kv_cache_usage_ratio                gauge     OnStep, SetEngineStats (used /
//                                                      capacity, 0 if capacity 0)
//   loom_preemptions_total                   counter   OnPreemption
//   loom_adapters{state}                     gauge     SetAdapterStates; state is one of
//                                                      LOADING READY UNLOADING FAILED
//                                                      (all four always exported)
//   loom_adapters_resident                   gauge     SetAdapterStates (weights in memory)
//   loom_adapter_resident_bytes              gauge     SetAdapterStates (sum of `bytes` of
//                                                      resident adapters)
//   loom_adapter_load_seconds{result}        histogram ObserveAdapterLoad; result = ok|error
//   loom_ready                               gauge     SetReady (1 ready, 0 not)
//   loom_tenant_*                            counters  tenants() (tenant_metrics.h)
//   loom_lora_requests_info{running_lora_adapters,waiting_lora_adapters,max_lora}
//                                            gauge     lora_requests_info() (its header)
// The latency histograms carry no adapter label (bounded cardinality).
//
// Adapter label of loom_requests_total (bounded cardinality):
//   * "" (no adapter, the base model) -> "base".
//   * At most `max_adapter_labels` (N) adapter ids hold a label SLOT and keep their own
//     id as the label; every other adapter -> "other". Ids "base" and "other" themselves
//     never get a slot (they count as "other"), so the label is never ambiguous.
//   * Between re-rankings, free slots go to the first distinct adapters seen (stable).
//   * Every `rerank_interval` (checked on RecordRequest; RerankAdapterLabels() forces
//     it) the slots are re-assigned to the N adapters with the most requests IN THE
//     WINDOW since the previous re-ranking; ties keep the current holder, then the
//     smaller id. A holder with no requests keeps its slot while fewer than N others
//     outrank it. Demoted adapters' series are REMOVED from the exposition (their later
//     requests count under "other"; a promoted adapter's series starts at 0, which
//     Prometheus treats as a new series / counter reset). So at any time the label takes
//     at most N + 2 values ("base", "other", N ids).
//   * An unknown id (e.g. a NotFound request) can take a FREE slot like any other, and
//     holds it at most until the next re-ranking in which N ids outrank it.
//   * The window tracks at most `max_tracked_adapters` distinct ids (memory bound against
//     arbitrary ids in rejected requests); ids beyond that cannot win a slot that window.
//   * `code` is one of the 17 canonical gRPC code names; any other string -> "UNKNOWN".
#ifndef LOOM_SERVER_METRICS_SERVER_METRICS_H_
#define LOOM_SERVER_METRICS_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/lora/adapter_store.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/engine/engine.h"
#include "scheduler/engine/engine_observer.h"
#include "server/metrics/lora_requests_info.h"
#include "server/metrics/tenant_metrics.h"

namespace loom {

class ServerMetrics {
 public:
  struct Options {
    int max_adapter_labels = 20;                       // N, >= 0
    absl::Duration rerank_interval = absl::Minutes(1);  // InfiniteDuration(): never auto
    int max_tracked_adapters = 10000;
    int max_tenant_labels = 100;                        // TenantMetrics
  };

  ServerMetrics();
  explicit ServerMetrics(Options options);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // The engine hooks (valid for this object's lifetime). Cheap, non-blocking apart from
  // prometheus-cpp's per-metric mutexes.
  EngineObserver* observer();

  // One finished RPC. `adapter_id` "" = base model. See "Adapter label" above.
  void RecordRequest(absl::string_view adapter_id, absl::string_view grpc_code_name);
  void RecordRequest(absl::string_view adapter_id, absl::StatusCode code);
  // Re-assigns the adapter label slots now (see above) and starts a new window.
  void RerankAdapterLabels();
  // The label RecordRequest would use for `adapter_id` right now (no side effects).
  std::string AdapterLabel(absl::string_view adapter_id) const;

  // Replaces the adapter gauges with a snapshot (e.g. AdapterStore::List()).
  void SetAdapterStates(const std::vector<AdapterInfo>& adapters);
  // One adapter load (Register or reload) that took `seconds`.
  void ObserveAdapterLoad(double seconds, bool ok);

  // Sets the running/waiting and KV gauges from an engine snapshot (the last-step batch
  // gauges are left to OnStep). Use from the scrape hook.
  void SetEngineStats(const EngineStats& stats);
  // `hook` runs at the start of every Render() (every scrape), on the scraping thread,
  // without any ServerMetrics lock held (it may call any method but Render). Replaces
  // the previous hook; nullptr clears it.
  void SetScrapeHook(std::function<void()> hook);

  // Readiness for /healthz and /readyz (false until the model is loaded).
  void SetReady(bool ready);
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  // Runs the scrape hook, then returns the Prometheus text exposition format 0.0.4 of
  // every metric.
  std::string Render() const;
  // Per-tenant counters and the gateway's adapter gauge (same registry).
  TenantMetrics* tenants() { return tenants_.get(); }
  LoraRequestsInfo* lora_requests_info() { return lora_requests_info_.get(); }

  // For components that want to register their own families (same exposition).
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  class Observer;
  static constexpr int kNumCodes = 17;
  using CodeCounters = std::array<prometheus::Counter*, kNumCodes>;

  // The label for `adapter_id`: its own id if it holds a slot or a slot is free (the
  // caller then takes it), else "other"; "" -> "base".
  std::string LabelLocked(absl::string_view adapter_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RerankLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveSeriesLocked(const std::string& label) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetKv(int used, int capacity);

  const Options options_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::atomic<bool> ready_{false};

  // Families and handles (owned by registry_).
  prometheus::Family<prometheus::Counter>* requests_family_ = nullptr;
  prometheus::Histogram* ttft_ = nullptr;
  prometheus::Histogram* itl_ = nullptr;
  prometheus::Histogram* e2e_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* batch_tokens_ = nullptr;
  prometheus::Gauge* batch_sequences_ = nullptr;
  prometheus::Histogram* step_tokens_ = nullptr;
  prometheus::Gauge* kv_used_ = nullptr;
  prometheus::Gauge* kv_total_ = nullptr;
  prometheus::Gauge* kv_ratio_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  std::array<prometheus::Gauge*, 4> adapters_by_state_{};  // indexed by AdapterState
  prometheus::Gauge* adapters_resident_ = nullptr;
  prometheus::Gauge* adapter_resident_bytes_ = nullptr;
  prometheus::Histogram* adapter_load_ok_ = nullptr;
  prometheus::Histogram* adapter_load_error_ = nullptr;
  prometheus::Gauge* ready_gauge_ = nullptr;

  std::unique_ptr<Observer> observer_;
  std::unique_ptr<TenantMetrics> tenants_;
  std::unique_ptr<LoraRequestsInfo> lora_requests_info_;

  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> window_counts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, CodeCounters> counters_ ABSL_GUARDED_BY(mu_);
  absl::Time last_rerank_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex hook_mu_;
  std::shared_ptr<const std::function<void()>> hook_ ABSL_GUARDED_BY(hook_mu_);
};

}  // namespace loom

#endif  // LOOM_SERVER_METRICS_SERVER_METRICS_H_
