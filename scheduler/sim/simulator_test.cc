#include "scheduler/sim/simulator.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/sim/workload.h"

namespace loom {
namespace {

WorkerHardware Gpu() { return *HardwarePreset("gpu"); }

std::vector<SimRequest> Workload(AdapterWorkload kind, int n, double rate, uint64_t seed = 3) {
  WorkloadOptions o;
  o.adapters = kind;
  o.num_requests = n;
  o.arrival_rate = rate;
  o.seed = seed;
  o.prompt.max = 512;
  o.output.max = 512;
  return *GenerateWorkload(o);
}

SimOptions Options(const std::string& policy, int workers, WorkerHardware hw) {
  SimOptions o;
  o.policy = policy;
  o.num_workers = workers;
  o.hardware = hw;
  return o;
}

// One request on one GPU worker, step by step from the model:
//   step 1 prefills 100 tokens (attention over 100 KV entries), loads its adapter and
//          emits token 1: 12.2 + 0.1 * 100 + 0.039 + 2 + 0.00035 * 100 = 24.274 ms
//   steps 2, 3 decode tokens 2, 3 over 101 and 102 KV entries:
//          12.2 + 0.045 + 0.039 + 0.00035 * 101 = 12.31935 ms, then 12.3197 ms.
// Both workers are held throughout (the idle one's grace of 10 s outlasts the run).
TEST(Simulator, SingleRequestTimingFollowsTheStepModel) {
  std::vector<SimRequest> reqs(1);
  reqs[0].arrival_s = 5.0;
  reqs[0].prompt_tokens = 100;
  reqs[0].output_tokens = 3;
  absl::StatusOr<SimReport> r = RunSimulation(reqs, Options("punica", 2, Gpu()));
  ASSERT_TRUE(r.ok()) << r.status();
  const double expected = (24.274 + 12.31935 + 12.3197) / 1000.0;
  EXPECT_NEAR(r->latency_p50_s, expected, 1e-9);
  EXPECT_NEAR(r->ttft_p99_s, 24.274 / 1000.0, 1e-9);
  EXPECT_NEAR(r->busy_worker_seconds, expected, 1e-9);
  EXPECT_NEAR(r->worker_seconds, 2 * expected, 1e-9);
  EXPECT_EQ(r->output_tokens, 3);
  EXPECT_EQ(r->steps, 3);
  EXPECT_EQ(r->peak_busy_workers, 1);
  EXPECT_EQ(r->releases, 0);
}

// Hardware whose every step takes 100 ms, so timings are easy to derive.
WorkerHardware FlatHardware() {
  WorkerHardware hw = Gpu();
  hw.latency = StepLatencyModel{};
  hw.latency.base_ms = 100;
  return hw;
}

SimRequest Request(uint64_t id, double arrival, int output) {
  SimRequest r;
  r.id = id;
  r.arrival_s = arrival;
  r.prompt_tokens = 10;
  r.output_tokens = output;
  return r;
}

// Held time with the autoscaler, derived by hand. 4 workers, one request of 50 steps
// (5 s) on worker 0 from t = 0; grace 2 s, ticks every 1 s: workers 1-3 are released at
// t = 2. Held: 4 x 2 + 1 x 3 = 11 worker-s; busy: 5.
TEST(Simulator, AutoscalerReleasesIdleWorkersAfterTheGrace) {
  std::vector<SimRequest> reqs = {Request(0, 0.0, 50)};
  SimOptions o = Options("punica", 4, FlatHardware());
  o.autoscale.idle_grace_s = 2.0;
  absl::StatusOr<SimReport> r = RunSimulation(reqs, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan_s, 5.0, 1e-6);
  EXPECT_NEAR(r->worker_seconds, 11.0, 1e-6);
  EXPECT_NEAR(r->busy_worker_seconds, 5.0, 1e-6);
  EXPECT_EQ(r->releases, 3);
  EXPECT_EQ(r->acquisitions, 0);
  // Without the autoscaler the whole pool is held for the whole run.
  o.autoscale.enabled = false;
  r = RunSimulation(reqs, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->worker_seconds, 20.0, 1e-6);
  EXPECT_EQ(r->releases, 0);
}

// Acquisition on want_more, with its cold start. 2 workers, batch cap 1, grace 0.5 s,
// cold start 2 s. A (50 steps) runs on worker 0 over [0, 5]. Worker 1 is released at the
// t = 1 tick. B arrives at 1.5 and queues (worker 0 full, worker 1 released); the t = 2
// tick sees want_more and acquires worker 1, ready at 4: B runs over [4, 9] (queued
// 2.5 s). Worker 0, idle from 5, is released at the t = 6 tick.
// Held: [0,1] 2 + [1,2] 1 + [2,6] 2 x 4 + [6,9] 1 x 3 = 14 worker-s.
TEST(Simulator, AutoscalerAcquiresOnWantMoreAfterAColdStart) {
  std::vector<SimRequest> reqs = {Request(0, 0.0, 50), Request(1, 1.5, 50)};
  SimOptions o = Options("least_loaded", 2, FlatHardware());
  o.placement.max_batch_size = 1;
  o.autoscale.idle_grace_s = 0.5;
  o.autoscale.cold_start_s = 2.0;
  absl::StatusOr<SimReport> r = RunSimulation(reqs, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan_s, 9.0, 1e-6);
  EXPECT_NEAR(r->queue_p99_s, 2.5, 1e-6);
  EXPECT_NEAR(r->latency_p99_s, 7.5, 1e-6);
  EXPECT_NEAR(r->worker_seconds, 14.0, 1e-6);
  EXPECT_NEAR(r->busy_worker_seconds, 10.0, 1e-6);
  EXPECT_EQ(r->releases, 2);
  EXPECT_EQ(r->acquisitions, 1);
  EXPECT_EQ(r->peak_held_workers, 2);
}

// Every request completes exactly once with exactly its tokens (RunSimulation checks and
// returns Internal otherwise), under KV pressure (evictions) and consolidation
// (migrations), for every policy and workload.
TEST(Simulator, ConservesRequestsUnderEvictionAndMigration) {
  WorkerHardware hw = *HardwarePreset("cpu");
  hw.kv_pages = 160;  // 2560 tokens per worker: a full batch of long requests overflows
  for (const char* policy : {"punica", "round_robin", "least_loaded"}) {
    for (AdapterWorkload kind : {AdapterWorkload::kDistinct, AdapterWorkload::kSkewed}) {
      std::vector<SimRequest> reqs = Workload(kind, 300, 2.0);
      SimOptions o = Options(policy, 4, hw);
      o.placement.max_batch_size = 16;
      o.consolidate = std::string(policy) == "punica";
      o.consolidate_period_s = 0.5;
      absl::StatusOr<SimReport> r = RunSimulation(reqs, o);
      ASSERT_TRUE(r.ok()) << policy << ": " << r.status();
      int64_t tokens = 0;
      for (const SimRequest& q : reqs) tokens += q.output_tokens;
      EXPECT_EQ(r->requests, 300);
      EXPECT_EQ(r->output_tokens, tokens);
      EXPECT_GT(r->evictions, 0) << policy << ": the KV pool should force evictions";
      if (o.consolidate) {
        EXPECT_GT(r->migrations, 0);
      }
      EXPECT_LE(r->peak_busy_workers, 4);
      EXPECT_LE(r->mean_busy_workers, 4.0 + 1e-9);
    }
  }
}

TEST(Simulator, PunicaPacksOntoFewerWorkersAtLowLoad) {
  const WorkerHardware hw = Gpu();
  const double capacity = EstimateCapacityRps(hw, 32, 8, 161, 338);
  std::vector<SimRequest> reqs = Workload(AdapterWorkload::kDistinct, 1500, 0.2 * capacity);
  SimOptions punica = Options("punica", 8, hw);
  punica.consolidate = true;
  absl::StatusOr<SimReport> p = RunSimulation(reqs, punica);
  absl::StatusOr<SimReport> ll = RunSimulation(reqs, Options("least_loaded", 8, hw));
  ASSERT_TRUE(p.ok() && ll.ok());
  EXPECT_LT(p->mean_busy_workers, 0.6 * ll->mean_busy_workers);
  EXPECT_LT(p->worker_seconds, 0.6 * ll->worker_seconds);
  // Same work done.
  EXPECT_EQ(p->output_tokens, ll->output_tokens);
}

TEST(Simulator, IsDeterministic) {
  std::vector<SimRequest> reqs = Workload(AdapterWorkload::kUniform, 400, 10.0);
  SimOptions o = Options("punica", 4, Gpu());
  o.consolidate = true;
  absl::StatusOr<SimReport> a = RunSimulation(reqs, o), b = RunSimulation(reqs, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->latency_p99_s, b->latency_p99_s);
  EXPECT_EQ(a->worker_seconds, b->worker_seconds);
  EXPECT_EQ(a->migrations, b->migrations);
  EXPECT_EQ(a->steps, b->steps);
}

TEST(Simulator, RejectsRequestsThatCannotFitAWorker) {
  WorkerHardware hw = Gpu();
  hw.kv_pages = 10;  // 160 tokens
  std::vector<SimRequest> reqs(1);
  reqs[0].prompt_tokens = 100;
  reqs[0].output_tokens = 100;
  EXPECT_EQ(RunSimulation(reqs, Options("punica", 1, hw)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunSimulation(reqs, Options("fifo", 1, Gpu())).status().code(),
            absl::StatusCode::kInvalidArgument);
  reqs[0].output_tokens = 10;
  SimOptions o = Options("punica", 2, Gpu());
  ASSERT_TRUE(RunSimulation(reqs, o).ok());
  o.autoscale.min_workers = 3;
  EXPECT_EQ(RunSimulation(reqs, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Percentile, NearestRank) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(Percentile(v, 0.5), 3);
  EXPECT_EQ(Percentile(v, 0.99), 5);
  EXPECT_EQ(Percentile(v, 0.0), 1);
  EXPECT_EQ(Percentile({}, 0.5), 0);
}

}  // namespace
}  // namespace loom
