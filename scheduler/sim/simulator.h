// Discrete-event simulation of a cluster: the REAL Router, placement policy and
// consolidation planner (scheduler/router) in front of modelled workers (SimWorker with a
// StepLatencyModel). Events: request arrivals, worker step ends, and periodic
// consolidation ticks; ties in time resolve by (kind, worker id), so a run is a pure
// function of its inputs.
//
// Worker-seconds: a worker is held from the moment it gets a request until it holds none
// (then it is idle and released at once; no cold-start cost is modelled), summed over
// workers.
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

struct SimOptions {
  int num_workers = 8;
  std::string policy = "punica";  // punica | round_robin | least_loaded
  PlacementOptions placement;     // kv_page_size is taken from the hardware
  WorkerHardware hardware;
  // Periodic consolidation (cancel + re-add with recompute) onto fuller workers.
  bool consolidate = false;
  double consolidate_period_s = 1.0;
  ConsolidationOptions consolidation;
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
  double worker_seconds = 0;
  double mean_busy_workers = 0;  // worker_seconds / makespan
  int peak_busy_workers = 0;
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
// for the given mean lengths: workers / (mean_output * step(B) / B + mean_prompt * prefill).
double EstimateCapacityRps(const WorkerHardware& hardware, int max_batch_size, int workers,
                           double mean_prompt, double mean_output);

}  // namespace loom

#endif  // LOOM_SCHEDULER_SIM_SIMULATOR_H_
