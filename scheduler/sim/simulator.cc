#include "scheduler/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/router/router.h"
#include "scheduler/sim/sim_worker.h"

namespace loom {
namespace {

enum EventKind { kStepEnd = 0, kReady = 1, kArrival = 2, kTick = 3, kScale = 4 };

struct Event {
  double t;
  int kind;
  int worker;  // kStepEnd, kReady: worker index; kArrival: request index
  bool operator>(const Event& o) const {
    return std::tie(t, kind, worker) > std::tie(o.t, o.kind, o.worker);
  }
};

class ClusterSim {
 public:
  ClusterSim(const std::vector<SimRequest>& requests, const SimOptions& options,
             std::unique_ptr<PlacementPolicy> policy)
      : requests_(requests),
        options_(options),
        router_(std::move(policy), RouterOptions{}),
        views_(options.num_workers),
        busy_since_(options.num_workers, 0.0),
        idle_since_(options.num_workers, 0.0),
        held_(options.num_workers, false),
        pool_(options.num_workers, kHeld),
        location_(requests.size(), -1),
        requeued_generated_(requests.size(), 0),
        placed_s_(requests.size(), -1.0),
        first_token_s_(requests.size(), -1.0),
        done_s_(requests.size(), -1.0) {
    workers_.reserve(options.num_workers);
    for (int w = 0; w < options.num_workers; ++w) {
      workers_.emplace_back(w, &options_.hardware, &options_.placement, &views_[w]);
    }
  }

  absl::StatusOr<SimReport> Run();

 private:
  void OnArrival(int index);
  void OnStepEnd(int w);
  void OnTick();
  void OnScale();
  void OnReady(int w);
  void Place(uint64_t request, int generated, int w);
  void StartIfIdle(int w);
  void DrainQueue();
  void AfterChange(int w);  // held/idle accounting and view refresh
  PlacementRequest ReAdd(uint64_t request, int generated) const;

  const std::vector<SimRequest>& requests_;
  const SimOptions options_;
  Router router_;
  std::vector<WorkerView> views_;  // index == worker id; never resized
  std::vector<SimWorker> workers_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double now_ = 0;
  std::vector<double> busy_since_, idle_since_;
  std::vector<bool> held_;  // worker holds at least one request
  enum PoolState { kHeld, kStarting, kReleased };
  std::vector<PoolState> pool_;  // autoscaler state; kStarting and kReleased are draining
  int pool_held_ = 0;            // kHeld + kStarting
  int peak_held_ = 0;
  int64_t releases_ = 0, acquisitions_ = 0;
  double held_seconds_ = 0, held_seconds_at_end_ = 0;
  std::vector<int> location_;           // worker index, or -1 while queued
  std::vector<int> requeued_generated_;  // tokens generated when last (re)queued
  std::vector<double> placed_s_, first_token_s_, done_s_;
  double worker_seconds_ = 0;  // busy (holding a request)
  int busy_ = 0, peak_busy_ = 0;
  int64_t migrations_ = 0, evictions_ = 0, tokens_ = 0;
  size_t completed_ = 0;
  absl::Status error_;
};

PlacementRequest ClusterSim::ReAdd(uint64_t request, int generated) const {
  const SimRequest& r = requests_[request];
  PlacementRequest p;
  p.id = request;
  p.adapter_id = AdapterName(r.adapter);
  p.context_tokens = r.prompt_tokens + generated;
  p.max_new_tokens = r.output_tokens - generated;
  return p;
}

void ClusterSim::AfterChange(int w) {
  const bool busy = !workers_[w].empty();
  if (busy && !held_[w]) {
    busy_since_[w] = now_;
    peak_busy_ = std::max(peak_busy_, ++busy_);
  } else if (!busy && held_[w]) {
    worker_seconds_ += now_ - busy_since_[w];
    idle_since_[w] = now_;
    --busy_;
  }
  held_[w] = busy;
  workers_[w].SyncView(static_cast<int64_t>(std::llround(idle_since_[w] * 1e6)));
}

void ClusterSim::Place(uint64_t request, int generated, int w) {
  const SimRequest& r = requests_[request];
  workers_[w].Admit(request, r.adapter, r.prompt_tokens, generated, r.output_tokens);
  location_[request] = w;
  if (placed_s_[request] < 0) placed_s_[request] = now_;
  AfterChange(w);
}

void ClusterSim::StartIfIdle(int w) {
  SimWorker& worker = workers_[w];
  if (worker.stepping() || worker.empty()) return;
  std::vector<SimSequence> evicted;
  const double ms = worker.StartStep(&evicted);
  for (const SimSequence& s : evicted) {
    ++evictions_;
    location_[s.request] = -1;
    requeued_generated_[s.request] = s.generated;
    router_.Requeue(ReAdd(s.request, s.generated));
  }
  AfterChange(w);
  events_.push({now_ + ms / 1000.0, kStepEnd, w});
}

void ClusterSim::DrainQueue() {
  for (;;) {
    std::vector<Assignment> assigned = router_.DrainQueue(absl::MakeSpan(views_));
    if (assigned.empty()) return;
    for (const Assignment& a : assigned) {
      Place(a.request_id, requeued_generated_[a.request_id], a.worker_id);
    }
    for (const Assignment& a : assigned) StartIfIdle(a.worker_id);
  }
}

void ClusterSim::OnArrival(int index) {
  if (index + 1 < static_cast<int>(requests_.size())) {
    events_.push({requests_[index + 1].arrival_s, kArrival, index + 1});
  }
  absl::StatusOr<std::optional<int>> placed =
      router_.Submit(ReAdd(index, 0), absl::MakeSpan(views_));
  if (!placed.ok()) {
    error_ = placed.status();
    return;
  }
  if (placed->has_value()) {
    Place(index, 0, **placed);
    StartIfIdle(**placed);
  }
}

void ClusterSim::OnStepEnd(int w) {
  std::vector<SimSequence> finished;
  std::vector<uint64_t> first;
  tokens_ += workers_[w].FinishStep(&finished, &first);
  for (uint64_t id : first) {
    if (first_token_s_[id] < 0) first_token_s_[id] = now_;
  }
  for (const SimSequence& s : finished) {
    if (done_s_[s.request] >= 0 || s.generated != requests_[s.request].output_tokens) {
      error_ = absl::InternalError(absl::StrCat("request ", s.request, " finished twice or with ",
                                                s.generated, " tokens"));
    }
    done_s_[s.request] = now_;
    location_[s.request] = -1;
    ++completed_;
  }
  AfterChange(w);
  StartIfIdle(w);
  DrainQueue();
}

void ClusterSim::OnTick() {
  if (completed_ < requests_.size()) {
    events_.push({now_ + options_.consolidate_period_s, kTick, 0});
  }
  // Consolidation frees workers only when nothing waits (waiting work wants capacity).
  if (router_.queued() > 0) return;
  std::vector<RunningRequest> running;
  for (const SimWorker& worker : workers_) {
    for (const SimSequence& s : worker.sequences()) {
      RunningRequest r;
      r.request = ReAdd(s.request, s.generated);
      r.worker_id = worker.id();
      r.kv_pages = s.pages;
      r.admission_seq = s.admission_seq;
      running.push_back(std::move(r));
    }
  }
  const std::vector<Move> moves = PlanConsolidation(
      running, absl::MakeSpan(views_), options_.placement, options_.consolidation);
  for (const Move& m : moves) {
    // Cancel on the source (progress of an in-flight step there is discarded), re-add
    // with recomputation of prompt + generated on the destination.
    const SimSequence s = workers_[m.from_worker].Remove(m.request_id);
    AfterChange(m.from_worker);
    Place(m.request_id, s.generated, m.to_worker);
    StartIfIdle(m.to_worker);
    ++migrations_;
  }
}

void ClusterSim::OnScale() {
  const AutoscaleOptions& a = options_.autoscale;
  if (completed_ < requests_.size()) events_.push({now_ + a.period_s, kScale, 0});
  const ScaleSignals sig = ComputeScaleSignals(
      views_, router_.queued(), static_cast<int64_t>(std::llround(now_ * 1e6)),
      static_cast<int64_t>(std::llround(a.idle_grace_s * 1e6)));
  // Release the highest ids first: every policy breaks ties to the lower id.
  for (auto it = sig.idle_workers.rbegin(); it != sig.idle_workers.rend(); ++it) {
    if (pool_held_ <= a.min_workers) break;
    pool_[*it] = kReleased;
    views_[*it].draining = true;
    --pool_held_;
    ++releases_;
  }
  if (!sig.want_more) return;
  const int batch = std::max(options_.placement.max_batch_size, 1);
  int want = std::max<int>(1, static_cast<int>((sig.queued + batch - 1) / batch));
  for (PoolState p : pool_) want -= p == kStarting ? 1 : 0;
  for (int w = 0; w < options_.num_workers && want > 0; ++w) {
    if (pool_[w] != kReleased) continue;
    pool_[w] = kStarting;
    ++pool_held_;
    ++acquisitions_;
    --want;
    events_.push({now_ + a.cold_start_s, kReady, w});
  }
  peak_held_ = std::max(peak_held_, pool_held_);
}

void ClusterSim::OnReady(int w) {
  pool_[w] = kHeld;
  views_[w].draining = false;
  idle_since_[w] = now_;
  AfterChange(w);
  DrainQueue();
}

absl::StatusOr<SimReport> ClusterSim::Run() {
  if (requests_.empty()) return absl::InvalidArgumentError("no requests to simulate");
  const double start = requests_[0].arrival_s;
  // The whole pool is held (and idle) when the first request arrives.
  pool_held_ = peak_held_ = options_.num_workers;
  for (int w = 0; w < options_.num_workers; ++w) {
    idle_since_[w] = start;
    AfterChange(w);
  }
  events_.push({start, kArrival, 0});
  if (options_.consolidate) {
    events_.push({start + options_.consolidate_period_s, kTick, 0});
  }
  if (options_.autoscale.enabled) {
    events_.push({start + options_.autoscale.period_s, kScale, 0});
  }
  double last_t = start;
  while (!events_.empty() && error_.ok()) {
    const Event e = events_.top();
    events_.pop();
    now_ = e.t;
    if (completed_ < requests_.size()) held_seconds_ += pool_held_ * (now_ - last_t);
    last_t = now_;
    switch (e.kind) {
      case kStepEnd: OnStepEnd(e.worker); break;
      case kReady: OnReady(e.worker); break;
      case kArrival: OnArrival(e.worker); break;
      case kTick: OnTick(); break;
      case kScale: OnScale(); break;
    }
  }
  if (!error_.ok()) return error_;
  int64_t expected_tokens = 0;
  for (const SimRequest& r : requests_) expected_tokens += r.output_tokens;
  if (completed_ != requests_.size() || tokens_ != expected_tokens) {
    return absl::InternalError(absl::StrCat("conservation broken: ", completed_, " of ",
                                            requests_.size(), " requests completed, ", tokens_,
                                            " of ", expected_tokens, " tokens emitted, ",
                                            router_.queued(), " still queued"));
  }
  SimReport rep;
  rep.policy = std::string(router_.policy().name());
  rep.workers = options_.num_workers;
  rep.requests = static_cast<int64_t>(requests_.size());
  rep.output_tokens = tokens_;
  std::vector<double> latency, queue, ttft;
  double last = 0, queue_sum = 0;
  for (size_t i = 0; i < requests_.size(); ++i) {
    const double a = requests_[i].arrival_s;
    latency.push_back(done_s_[i] - a);
    queue.push_back(placed_s_[i] - a);
    ttft.push_back(first_token_s_[i] - a);
    queue_sum += placed_s_[i] - a;
    last = std::max(last, done_s_[i]);
  }
  rep.makespan_s = last - requests_[0].arrival_s;
  rep.throughput_tok_s = rep.makespan_s > 0 ? tokens_ / rep.makespan_s : 0;
  rep.throughput_req_s = rep.makespan_s > 0 ? rep.requests / rep.makespan_s : 0;
  rep.latency_p50_s = Percentile(latency, 0.50);
  rep.latency_p99_s = Percentile(latency, 0.99);
  rep.ttft_p99_s = Percentile(ttft, 0.99);
  rep.queue_mean_s = queue_sum / requests_.size();
  rep.queue_p99_s = Percentile(queue, 0.99);
  rep.worker_seconds = held_seconds_;
  rep.busy_worker_seconds = worker_seconds_;
  rep.mean_busy_workers = rep.makespan_s > 0 ? held_seconds_ / rep.makespan_s : 0;
  rep.peak_busy_workers = peak_busy_;
  rep.peak_held_workers = peak_held_;
  rep.releases = releases_;
  rep.acquisitions = acquisitions_;
  rep.migrations = migrations_;
  rep.evictions = evictions_;
  for (const SimWorker& w : workers_) {
    rep.adapter_loads += w.adapter_loads();
    rep.steps += w.steps();
  }
  return rep;
}

absl::Status Validate(const std::vector<SimRequest>& requests, const SimOptions& o) {
  if (o.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers must be >= 1, got ", o.num_workers));
  }
  if (o.consolidate && !(o.consolidate_period_s > 0)) {
    return absl::InvalidArgumentError("consolidate_period_s must be > 0");
  }
  const AutoscaleOptions& a = o.autoscale;
  if (a.enabled && (!(a.period_s > 0) || !(a.idle_grace_s >= 0) || !(a.cold_start_s >= 0) ||
                    a.min_workers < 1 || a.min_workers > o.num_workers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "autoscale: need period_s > 0, idle_grace_s >= 0, cold_start_s >= 0 and min_workers in "
        "[1, num_workers], got ", a.period_s, ", ", a.idle_grace_s, ", ", a.cold_start_s, ", ",
        a.min_workers));
  }
  const WorkerHardware& h = o.hardware;
  if (h.kv_pages < 1 || h.kv_page_size < 1 || h.max_batch_tokens < 1 || h.adapter_cache_slots < 1) {
    return absl::InvalidArgumentError("hardware capacities must be >= 1");
  }
  const int64_t keep = static_cast<int64_t>(
      std::ceil(o.placement.kv_admit_free_fraction * static_cast<double>(h.kv_pages)));
  for (size_t i = 0; i < requests.size(); ++i) {
    const SimRequest& r = requests[i];
    if (r.id != i || r.prompt_tokens < 1 || r.output_tokens < 1 ||
        (i > 0 && r.arrival_s < requests[i - 1].arrival_s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", i, ": ids must equal indices, lengths >= 1, arrivals ascending"));
    }
    PlacementRequest p;
    p.context_tokens = r.prompt_tokens + r.output_tokens;
    p.max_new_tokens = 0;
    if (PagesNeeded(p, o.placement) > h.kv_pages - keep) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", i, " (", r.prompt_tokens, " + ", r.output_tokens,
          " tokens) cannot fit one worker's KV pool of ", h.kv_pages, " pages above the watermark"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * values.size()));
  const size_t k = std::min(values.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(values.begin(), values.begin() + k, values.end());
  return values[k];
}

double EstimateCapacityRps(const WorkerHardware& h, int max_batch_size, int workers,
                           double mean_prompt, double mean_output) {
  StepShape full;
  full.decode_tokens = max_batch_size;
  full.distinct_adapters = 1;
  full.kv_tokens = std::llround(max_batch_size * (mean_prompt + mean_output / 2));
  const double step_ms = h.latency.StepMs(full);
  const double ms_per_request =
      mean_output * step_ms / max_batch_size + mean_prompt * h.latency.prefill_ms_per_token;
  return workers * 1000.0 / ms_per_request;
}

absl::StatusOr<SimReport> RunSimulation(const std::vector<SimRequest>& requests,
                                        const SimOptions& options) {
  SimOptions o = options;
  o.placement.kv_page_size = o.hardware.kv_page_size;
  if (absl::Status s = Validate(requests, o); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> policy =
      CreatePlacementPolicy(o.policy, o.placement);
  if (!policy.ok()) return policy.status();
  ClusterSim sim(requests, o, *std::move(policy));
  return sim.Run();
}

}  // namespace loom
