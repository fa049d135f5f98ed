#include "server/metrics/server_metrics.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "prometheus/text_serializer.h"

namespace loom {
namespace {

using prometheus::Histogram;

// Canonical gRPC code names; index = numeric code (absl::StatusCode uses the same values).
int CodeIndex(absl::string_view name) {
  static const auto* const kIndex = [] {
    auto* m = new absl::flat_hash_map<std::string, int>();
    for (int i = 0; i < 17; ++i) {
      (*m)[absl::StatusCodeToString(static_cast<absl::StatusCode>(i))] = i;
    }
    return m;
  }();
  auto it = kIndex->find(name);
  return it == kIndex->end() ? static_cast<int>(absl::StatusCode::kUnknown) : it->second;
}

std::string CodeName(int index) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(index));
}

constexpr absl::string_view kBaseLabel = "base";
constexpr absl::string_view kOtherLabel = "other";

// Bucket upper bounds (seconds / tokens). Chosen to cover a CPU-only small model (tens of
// ms per token) up to a large model under load (minutes end to end).
const Histogram::BucketBoundaries& TtftBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
      1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
  return *b;
}
const Histogram::BucketBoundaries& ItlBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
      0.1,   0.15,   0.2,   0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0};
  return *b;
}
const Histogram::BucketBoundaries& E2eBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0,
      600.0};
  return *b;
}
const Histogram::BucketBoundaries& LoadBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
  return *b;
}
const Histogram::BucketBoundaries& StepTokenBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  return *b;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

// The engine hooks: plain updates of handles resolved at construction.
class ServerMetrics::Observer : public EngineObserver {
 public:
  explicit Observer(ServerMetrics* m) : m_(m) {}

  void OnStep(int batch_tokens, int batch_sequences, int running, int waiting,
              int kv_pages_used, int kv_pages_total) override {
    m_->batch_tokens_->Set(batch_tokens);
    m_->batch_sequences_->Set(batch_sequences);
    m_->step_tokens_->Observe(batch_tokens);
    m_->running_->Set(running);
    m_->waiting_->Set(waiting);
    m_->SetKv(kv_pages_used, kv_pages_total);
  }
  void OnFirstToken(const std::string& /*adapter_id*/, absl::Duration ttft) override {
    m_->ttft_->Observe(Seconds(ttft));
  }
  void OnToken(const std::string& /*adapter_id*/, absl::Duration inter_token) override {
    m_->itl_->Observe(Seconds(inter_token));
  }
  void OnFinish(const std::string& /*adapter_id*/, const absl::Status& /*status*/,
                int prompt_tokens, int completion_tokens, absl::Duration e2e) override {
    if (prompt_tokens > 0) m_->prompt_tokens_->Increment(prompt_tokens);
    if (completion_tokens > 0) m_->generation_tokens_->Increment(completion_tokens);
    m_->e2e_->Observe(Seconds(e2e));
  }
  void OnPreemption() override { m_->preemptions_->Increment(); }

 private:
  ServerMetrics* const m_;
};

ServerMetrics::ServerMetrics() : ServerMetrics(Options()) {}

ServerMetrics::ServerMetrics(Options options)
    : options_(std::move(options)),
      registry_(std::make_shared<prometheus::Registry>()),
      last_rerank_(absl::Now()) {
  auto& r = *registry_;
  requests_family_ = &prometheus::BuildCounter()
                          .Name("loom_requests_total")
                          .Help("Finished inference RPCs by adapter (top adapters by "
                                "request count, then 'other'; 'base' = no adapter) and "
                                "gRPC status code.")
                          .Register(r);
  auto histogram = [&r](const char* name, const char* help,
                        const Histogram::BucketBoundaries& buckets) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
  };
  auto gauge = [&r](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
  };
  auto counter = [&r](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  ttft_ = histogram("loom_time_to_first_token_seconds",
                    "Time from request arrival to its first generated token.",
                    TtftBuckets());
  itl_ = histogram("loom_inter_token_latency_seconds",
                   "Time between consecutive generated tokens of one request.",
                   ItlBuckets());
  e2e_ = histogram("loom_request_duration_seconds",
                   "End-to-end time of finished requests (any outcome).", E2eBuckets());
  prompt_tokens_ = counter("loom_prompt_tokens_total", "Prompt tokens of finished requests.");
  generation_tokens_ =
      counter("loom_generation_tokens_total", "Tokens generated for finished requests.");
  running_ = gauge("loom_requests_running", "Requests in the engine's running batch.");
  waiting_ = gauge("loom_requests_waiting", "Requests queued for admission.");
  batch_tokens_ = gauge("loom_batch_tokens", "Tokens in the last forward step.");
  batch_sequences_ = gauge("loom_batch_sequences", "Sequences in the last forward step.");
  step_tokens_ = histogram("loom_step_tokens", "Tokens per forward step.", StepTokenBuckets());
  kv_used_ = gauge("loom_kv_cache_pages_used", "KV cache pages in use.");
  kv_total_ = gauge("loom_kv_cache_pages_capacity", "KV cache pages in the pool.");
  kv_ratio_ = gauge("loom_kv_cache_usage_ratio", "Fraction of KV cache pages in use (0..1).");
  preemptions_ = counter("loom_preemptions_total",
                         "Running requests preempted for KV pages (later recomputed).");
  auto& by_state = prometheus::BuildGauge()
                       .Name("loom_adapters")
                       .Help("Registered LoRA adapters by state.")
                       .Register(r);
  for (AdapterState s : {AdapterState::kLoading, AdapterState::kReady,
                         AdapterState::kUnloading, AdapterState::kFailed}) {
    adapters_by_state_[static_cast<int>(s)] = &by_state.Add({{"state", AdapterStateName(s)}});
  }
  adapters_resident_ =
      gauge("loom_adapters_resident", "Registered adapters whose weights are in memory.");
  adapter_resident_bytes_ = gauge("loom_adapter_resident_bytes",
                                  "Weight bytes of adapters resident in memory.");
  auto& load = prometheus::BuildHistogram()
                   .Name("loom_adapter_load_seconds")
                   .Help("Time to load an adapter's weights, by result.")
                   .Register(r);
  adapter_load_ok_ = &load.Add({{"result", "ok"}}, LoadBuckets());
  adapter_load_error_ = &load.Add({{"result", "error"}}, LoadBuckets());
  ready_gauge_ = gauge("loom_ready", "1 once the model is loaded and serving, else 0.");
  observer_ = std::make_unique<Observer>(this);
  tenants_ = std::make_unique<TenantMetrics>(r, options_.max_tenant_labels);
  lora_requests_info_ = std::make_unique<LoraRequestsInfo>(r);
}

ServerMetrics::~ServerMetrics() = default;

EngineObserver* ServerMetrics::observer() { return observer_.get(); }

void ServerMetrics::SetReady(bool ready) {
  ready_.store(ready, std::memory_order_release);
  ready_gauge_->Set(ready ? 1 : 0);
}

std::string ServerMetrics::LabelLocked(absl::string_view adapter_id) const {
  if (adapter_id.empty()) return std::string(kBaseLabel);
  if (adapter_id == kBaseLabel || adapter_id == kOtherLabel) return std::string(kOtherLabel);
  std::string id(adapter_id);
  if (slots_.contains(id)) return id;
  if (static_cast<int>(slots_.size()) < options_.max_adapter_labels) return id;  // free slot
  return std::string(kOtherLabel);
}

std::string ServerMetrics::AdapterLabel(absl::string_view adapter_id) const {
  absl::MutexLock lock(&mu_);
  return LabelLocked(adapter_id);
}

void ServerMetrics::RecordRequest(absl::string_view adapter_id, absl::StatusCode code) {
  RecordRequest(adapter_id, absl::StatusCodeToString(code));
}

void ServerMetrics::RecordRequest(absl::string_view adapter_id,
                                  absl::string_view grpc_code_name) {
  const int code = CodeIndex(grpc_code_name);
  absl::MutexLock lock(&mu_);
  if (options_.rerank_interval != absl::InfiniteDuration() &&
      absl::Now() - last_rerank_ >= options_.rerank_interval) {
    RerankLocked();
  }
  if (!adapter_id.empty()) {
    auto it = window_counts_.find(adapter_id);
    if (it != window_counts_.end()) {
      ++it->second;
    } else if (static_cast<int>(window_counts_.size()) < options_.max_tracked_adapters) {
      window_counts_.emplace(std::string(adapter_id), 1);
    }
  }
  std::string label = LabelLocked(adapter_id);
  if (label != kBaseLabel && label != kOtherLabel) slots_.insert(label);  // takes a free slot
  CodeCounters& counters = counters_[label];  // value-initialised: all null
  prometheus::Counter*& c = counters[code];
  if (c == nullptr) {
    c = &requests_family_->Add({{"adapter", label}, {"code", CodeName(code)}});
  }
  c->Increment();
}

void ServerMetrics::RerankAdapterLabels() {
  absl::MutexLock lock(&mu_);
  RerankLocked();
}

void ServerMetrics::RerankLocked() {
  last_rerank_ = absl::Now();
  // Candidates: current holders (count 0 unless seen) and every id seen this window.
  struct Candidate {
    uint64_t count;
    bool holder;
    const std::string* id;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(slots_.size() + window_counts_.size());
  for (const std::string& id : slots_) {
    auto it = window_counts_.find(id);
    candidates.push_back({it == window_counts_.end() ? 0 : it->second, true, &id});
  }
  for (const auto& [id, count] : window_counts_) {
    if (slots_.contains(id) || id == kBaseLabel || id == kOtherLabel) continue;
    candidates.push_back({count, false, &id});
  }
  const size_t keep =
      std::min(candidates.size(), static_cast<size_t>(std::max(0, options_.max_adapter_labels)));
  std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(),
                    [](const Candidate& a, const Candidate& b) {
                      if (a.count != b.count) return a.count > b.count;
                      if (a.holder != b.holder) return a.holder;
                      return *a.id < *b.id;
                    });
  absl::flat_hash_set<std::string> next;
  for (size_t i = 0; i < keep; ++i) next.insert(*candidates[i].id);
  candidates.clear();  // holds pointers into slots_/window_counts_
  std::vector<std::string> demoted;
  for (const std::string& id : slots_) {
    if (!next.contains(id)) demoted.push_back(id);
  }
  for (const std::string& id : demoted) RemoveSeriesLocked(id);
  slots_ = std::move(next);
  window_counts_.clear();
}

void ServerMetrics::RemoveSeriesLocked(const std::string& label) {
  auto it = counters_.find(label);
  if (it == counters_.end()) return;
  for (prometheus::Counter* c : it->second) {
    if (c != nullptr) requests_family_->Remove(c);
  }
  counters_.erase(it);
}

void ServerMetrics::SetAdapterStates(const std::vector<AdapterInfo>& adapters) {
  std::array<int, 4> by_state{};
  int resident = 0;
  double resident_bytes = 0;
  for (const AdapterInfo& a : adapters) {
    const int s = static_cast<int>(a.state);
    if (s >= 0 && s < 4) ++by_state[s];
    if (a.resident) {
      ++resident;
      resident_bytes += static_cast<double>(a.bytes);
    }
  }
  for (int s = 0; s < 4; ++s) adapters_by_state_[s]->Set(by_state[s]);
  adapters_resident_->Set(resident);
  adapter_resident_bytes_->Set(resident_bytes);
}

void ServerMetrics::SetKv(int used, int capacity) {
  kv_used_->Set(used);
  kv_total_->Set(capacity);
  kv_ratio_->Set(capacity > 0 ? static_cast<double>(used) / capacity : 0.0);
}

void ServerMetrics::SetEngineStats(const EngineStats& stats) {
  running_->Set(stats.running);
  waiting_->Set(stats.waiting);
  SetKv(stats.kv_pages_used, stats.kv_pages_total);
}

void ServerMetrics::SetScrapeHook(std::function<void()> hook) {
  auto p = hook ? std::make_shared<const std::function<void()>>(std::move(hook)) : nullptr;
  absl::MutexLock lock(&hook_mu_);
  hook_ = std::move(p);
}

void ServerMetrics::ObserveAdapterLoad(double seconds, bool ok) {
  (ok ? adapter_load_ok_ : adapter_load_error_)->Observe(seconds);
}

std::string ServerMetrics::Render() const {
  std::shared_ptr<const std::function<void()>> hook;
  {
    absl::MutexLock lock(&hook_mu_);
    hook = hook_;
  }
  if (hook) (*hook)();
  prometheus::TextSerializer serializer;
  std::ostringstream out;
  serializer.Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace loom
