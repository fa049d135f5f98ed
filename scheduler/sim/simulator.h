// Discrete-event simulation of a cluster: the REAL Router, placement policy and
// consolidation planner (scheduler/router) in front of modelled workers (SimWorker with a
// StepLatencyModel). Events: request arrivals, worker step ends, and periodic
// consolidation ticks; ties in time resolve by (kind, worker id), so a run is a pure
// function of its inputs.
//
// Worker-seconds = time workers are HELD (paid for), summed over workers, from the first
// arrival to the last completion. The cluster is a fixed pool of num_workers GPUs, all
// held at the start; the autoscaler (AutoscaleOptions) releases a worker that has held no
// request for idle_grace_s and brings released workers back, after cold_start_s, when
// requests queue and no held worker is idle (the router's ScaleSignals). A worker that is
// starting counts as held. With the autoscaler off every worker is held throughout.
// busy_worker_seconds (time a worker holds at least one request) is reported as well.
#ifndef LOOM_SCHEDULER_SIM_SIMULATOR_H_
#define LOOM_SCHEDULER_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/router/migration_planner.h"
#include "scheduler/router/worker_view.h"
#include "scheduler/sim/step_latency_model.h"
#include "scheduler/sim/workload.h"

namespace loom {

// The autoscaler, run every period_s on ComputeScaleSignals (scheduler/router/router.h).
// Released and starting workers are shown to the router as draining (they accept
// nothing). On want_more it acquires enough released workers for the queue at
// max_batch_size requests each (at least one, minus those already starting), lowest ids
// first. It never holds fewer than min_workers.
struct AutoscaleOptions {
  bool enabled = true;
  double period_s = 1.0;
  double idle_grace_s = 10.0;
  double cold_start_s = 5.0;
  int min_workers = 1;
};

struct SimOptions {
  int num_workers = 8;
  std::string policy = "punica";  // punica | round_robin | least_loaded
  PlacementOptions placement;     // kv_page_size is taken from the hardware
  WorkerHardware hardware;
  // Periodic consolidation (cancel + re-add with recompute) onto fuller workers.
  bool consolidate = false;
  double consolidate_period_s = 1.0;
  ConsolidationOptions consolidation;
  AutoscaleOptions autoscale;
};

struct SimReport {
  std::string policy;
  int workers = 0;
  int64_t requests = 0;
  int64_t output_tokens = 0;
  double makespan_s = 0;        // first arrival to last completion
  double throughput_tok_s = 0;  // output tokens / makespan
  double throughput_req_s = 0;
  double latency_p50_s = 0;     // arrival to last token
  double latency_p99_s = 0;
  double ttft_p99_s = 0;        // arrival to first token
  double queue_mean_s = 0;      // arrival to first placement
  double queue_p99_s = 0;
  double worker_seconds = 0;       // held (see above)
  double busy_worker_seconds = 0;  // holding at least one request
  double mean_busy_workers = 0;    // mean HELD workers: worker_seconds / makespan
  int peak_busy_workers = 0;       // most workers holding requests at once
  int peak_held_workers = 0;
  int64_t releases = 0;            // autoscaler releases and acquisitions
  int64_t acquisitions = 0;
  int64_t migrations = 0;
  int64_t evictions = 0;
  int64_t adapter_loads = 0;
  int64_t steps = 0;
};

// Runs `requests` (ascending arrival) to completion. InvalidArgument for bad options or a
// request that cannot fit one worker's KV pool; Internal if a request does not complete
// exactly once with exactly its output tokens (the conservation invariant).
absl::StatusOr<SimReport> RunSimulation(const std::vector<SimRequest>& requests,
                                        const SimOptions& options);

// q in [0, 1]; nearest-rank on a copy. 0 for an empty input.
double Percentile(std::vector<double> values, double q);

// Requests per second a cluster sustains with every worker at max_batch_size, one adapter,
// for the given mean lengths: workers / (mean_output * step(B) / B + mean_prompt * prefill),
// where step(B) reads B x (mean_prompt + mean_output / 2) KV tokens.
double EstimateCapacityRps(const WorkerHardware& hardware, int max_batch_size, int workers,
                           double mean_prompt, double mean_output);

}  // namespace loom

#endif  // LOOM_SCHEDULER_SIM_SIMULATOR_H_
