// loom_sim: runs the discrete-event cluster simulator over a grid of
// (workers x policies x workloads x loads) and prints one markdown table, plus a
// Punica-vs-least-loaded comparison when both policies ran.
//
//   loom_sim --mode=gpu --workers=8,64 --policies=punica,round_robin,least_loaded
//            --workloads=distinct --loads=0.3,0.6,0.9
//
// Loads are fractions of EstimateCapacityRps (every worker at max batch, one adapter,
// nominal mean lengths), so every policy and workload sees the same absolute rates and,
// for one seed, the same arrival instants and lengths.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "scheduler/sim/simulator.h"
#include "scheduler/sim/step_latency_model.h"
#include "scheduler/sim/workload.h"

ABSL_FLAG(std::string, mode, "gpu", "worker preset: gpu (Punica A100 figures) or cpu");
ABSL_FLAG(std::string, hardware_json, "", "JSON overriding the preset (see step_latency_model.h)");
ABSL_FLAG(std::string, workers, "8", "comma-separated simulated worker counts");
ABSL_FLAG(std::string, policies, "punica,round_robin,least_loaded", "comma-separated policies");
ABSL_FLAG(std::string, workloads, "distinct", "distinct,uniform,skewed,identical");
ABSL_FLAG(std::string, loads, "0.3,0.6,0.9", "arrival rates as fractions of estimated capacity");
ABSL_FLAG(int, requests_per_worker, 1500, "requests simulated = this x workers");
ABSL_FLAG(uint64_t, seed, 1, "workload seed");
ABSL_FLAG(int, max_batch_size, 32, "batch cap per worker (Punica: 32)");
ABSL_FLAG(double, kv_admit_free_fraction, 0.02, "KV low watermark for new placements");
ABSL_FLAG(double, kv_migrate_free_fraction, 0.10, "KV watermark for migration destinations");
ABSL_FLAG(bool, consolidate, true, "punica only: periodic consolidation by migration");
ABSL_FLAG(double, consolidate_period_s, 1.0, "consolidation period (simulated seconds)");
ABSL_FLAG(int, max_source_load, 8, "consolidation empties workers with at most this load");
ABSL_FLAG(bool, match_p99, false,
          "also find the fewest workers least_loaded needs to meet punica's p99 at each rate "
          "(an oracle that sizes a static cluster for the known rate)");
ABSL_FLAG(double, rate, 0, "absolute arrival rate in req/s (overrides --loads when > 0)");
ABSL_FLAG(int, requests, 0, "requests simulated (overrides --requests_per_worker when > 0)");
ABSL_FLAG(std::string, prompt_len, "",
          "prompt tokens: N | uniform:A:B | lognormal:MEAN:SIGMA:MIN:MAX (default: "
          "ShareGPT-like lognormal:161:1:4:2048)");
ABSL_FLAG(std::string, output_len, "",
          "output tokens, same forms (default: lognormal:338:0.8:4:2048)");
ABSL_FLAG(double, rate_amplitude, 0,
          "rate(t) = rate * (1 + A sin(2 pi t / period)): load that rises and falls; 0 = constant");
ABSL_FLAG(double, rate_period_s, 600, "period of the rate modulation (simulated seconds)");
ABSL_FLAG(bool, json, false, "print one JSON object per run instead of markdown");
ABSL_FLAG(bool, autoscale, true, "release idle workers / acquire on want_more (all policies)");
ABSL_FLAG(double, autoscale_period_s, 1.0, "autoscaler period (simulated seconds)");
ABSL_FLAG(double, idle_grace_s, 10.0, "a worker idle this long is released");
ABSL_FLAG(double, cold_start_s, 5.0, "a released worker serves again this long after acquisition");
ABSL_FLAG(int, min_workers, 1, "the autoscaler never holds fewer workers");

namespace loom {
namespace {

std::vector<std::string> List(const std::string& s) {
  return absl::StrSplit(s, ',', absl::SkipEmpty());
}

struct Row {
  int workers;
  std::string workload;
  double load;
  double rate;
  SimReport report;
};

absl::StatusOr<SimReport> RunOne(const WorkerHardware& hw, int workers, const std::string& policy,
                                 const std::vector<SimRequest>& requests) {
  SimOptions o;
  o.num_workers = workers;
  o.policy = policy;
  o.hardware = hw;
  o.placement.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  o.placement.kv_admit_free_fraction = absl::GetFlag(FLAGS_kv_admit_free_fraction);
  o.placement.kv_migrate_free_fraction = absl::GetFlag(FLAGS_kv_migrate_free_fraction);
  o.consolidate = policy == "punica" && absl::GetFlag(FLAGS_consolidate);
  o.consolidate_period_s = absl::GetFlag(FLAGS_consolidate_period_s);
  o.consolidation.max_source_load = absl::GetFlag(FLAGS_max_source_load);
  o.autoscale.enabled = absl::GetFlag(FLAGS_autoscale);
  o.autoscale.period_s = absl::GetFlag(FLAGS_autoscale_period_s);
  o.autoscale.idle_grace_s = absl::GetFlag(FLAGS_idle_grace_s);
  o.autoscale.cold_start_s = absl::GetFlag(FLAGS_cold_start_s);
  o.autoscale.min_workers = std::min(absl::GetFlag(FLAGS_min_workers), workers);
  return RunSimulation(requests, o);
}

void PrintJson(const Row& r) {
  const SimReport& s = r.report;
  std::printf("{\"workers\": %d, \"policy\": \"%s\", \"workload\": \"%s\", \"rate\": %.6g, "
              "\"requests\": %lld, \"output_tokens\": %lld, \"throughput_tok_s\": %.6g, "
              "\"throughput_req_s\": %.6g, \"latency_p50_s\": %.6g, \"latency_p99_s\": %.6g, "
              "\"ttft_p99_s\": %.6g, \"queue_mean_s\": %.6g, \"worker_seconds\": %.6g, "
              "\"busy_worker_seconds\": %.6g, \"makespan_s\": %.6g, \"migrations\": %lld, "
              "\"evictions\": %lld, \"steps\": %lld}\n",
              r.workers, s.policy.c_str(), r.workload.c_str(), r.rate,
              static_cast<long long>(s.requests), static_cast<long long>(s.output_tokens),
              s.throughput_tok_s, s.throughput_req_s, s.latency_p50_s, s.latency_p99_s,
              s.ttft_p99_s, s.queue_mean_s, s.worker_seconds, s.busy_worker_seconds, s.makespan_s,
              static_cast<long long>(s.migrations), static_cast<long long>(s.evictions),
              static_cast<long long>(s.steps));
}

void PrintRow(const Row& r) {
  if (absl::GetFlag(FLAGS_json)) return PrintJson(r);
  const SimReport& s = r.report;
  std::printf("| %d | %s | %s | %.0f%% | %.1f | %.0f | %.1f | %.1f | %.2f | %.2f | %.0f | %.1f | %.0f | %lld | %lld | %lld |\n",
              r.workers, s.policy.c_str(), r.workload.c_str(), 100 * r.load, r.rate,
              s.throughput_tok_s, s.latency_p50_s, s.latency_p99_s, s.ttft_p99_s, s.queue_mean_s,
              s.worker_seconds, s.mean_busy_workers, s.busy_worker_seconds,
              static_cast<long long>(s.releases), static_cast<long long>(s.migrations),
              static_cast<long long>(s.evictions));
}

// Fewest workers (<= max_workers) with which least_loaded meets `p99`; -1 if none.
int LeastLoadedWorkersFor(const WorkerHardware& hw, int max_workers, double p99,
                          const std::vector<SimRequest>& requests, SimReport* out) {
  int lo = 1, hi = max_workers, best = -1;
  while (lo <= hi) {
    const int mid = (lo + hi) / 2;
    absl::StatusOr<SimReport> r = RunOne(hw, mid, "least_loaded", requests);
    if (r.ok() && r->latency_p99_s <= p99) {
      best = mid;
      *out = *r;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  return best;
}

int Main() {
  absl::StatusOr<WorkerHardware> hw = HardwarePreset(absl::GetFlag(FLAGS_mode));
  if (hw.ok() && !absl::GetFlag(FLAGS_hardware_json).empty()) {
    std::ifstream f(absl::GetFlag(FLAGS_hardware_json));
    std::stringstream text;
    text << f.rdbuf();
    hw = f ? HardwareFromJson(text.str(), *hw)
           : absl::StatusOr<WorkerHardware>(absl::NotFoundError("cannot read hardware_json"));
  }
  if (!hw.ok()) {
    std::fprintf(stderr, "loom_sim: %s\n", hw.status().ToString().c_str());
    return 2;
  }
  const StepLatencyModel& m = hw->latency;
  const bool json = absl::GetFlag(FLAGS_json);
  LengthDistribution prompt_len = WorkloadOptions().prompt, output_len = WorkloadOptions().output;
  for (auto [flag, dist] : {std::pair{absl::GetFlag(FLAGS_prompt_len), &prompt_len},
                            std::pair{absl::GetFlag(FLAGS_output_len), &output_len}}) {
    if (flag.empty()) continue;
    absl::StatusOr<LengthDistribution> d = ParseLengthDistribution(flag);
    if (!d.ok()) {
      std::fprintf(stderr, "loom_sim: %s\n", d.status().ToString().c_str());
      return 2;
    }
    *dist = *d;
  }
  if (!json) std::printf("Worker model: %s. step_ms = %.3f + %.3f*decode + %.3f*prefill + %.3f*distinct_adapters"
              " + %.1f*adapter_loads + %.5f*kv_tokens; KV %d pages x %d tokens; batch cap %d; "
              "seed %llu. Autoscaler: %s. Arrivals: %s.\n\n",
              hw->name.c_str(), m.base_ms, m.decode_ms_per_token, m.prefill_ms_per_token,
              m.ms_per_distinct_adapter, m.adapter_load_ms, m.ms_per_kv_token, hw->kv_pages,
              hw->kv_page_size, absl::GetFlag(FLAGS_max_batch_size),
              static_cast<unsigned long long>(absl::GetFlag(FLAGS_seed)),
              absl::GetFlag(FLAGS_autoscale)
                  ? absl::StrFormat("release after %.0f s idle, cold start %.0f s, period %.1f s, "
                                    "min %d held", absl::GetFlag(FLAGS_idle_grace_s),
                                    absl::GetFlag(FLAGS_cold_start_s),
                                    absl::GetFlag(FLAGS_autoscale_period_s),
                                    absl::GetFlag(FLAGS_min_workers)).c_str()
                  : "off (every worker held throughout)",
              absl::GetFlag(FLAGS_rate_amplitude) > 0
                  ? absl::StrFormat("Poisson, rate(t) = rate x (1 + %.2f sin(2 pi t / %.0f s))",
                                    absl::GetFlag(FLAGS_rate_amplitude),
                                    absl::GetFlag(FLAGS_rate_period_s)).c_str()
                  : "Poisson, constant rate");
  if (!json) std::printf("| GPUs | policy | workload | load | rate (req/s) | throughput (tok/s) | p50 (s) | "
              "p99 (s) | TTFT p99 (s) | queue mean (s) | worker-s (held) | mean held | busy worker-s | "
              "releases | migrations | evictions |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<Row> rows;
  std::vector<std::tuple<int, std::string, double, double, std::vector<SimRequest>>> grids;
  for (const std::string& ws : List(absl::GetFlag(FLAGS_workers))) {
    int workers = 0;
    if (!absl::SimpleAtoi(ws, &workers) || workers < 1) {
      std::fprintf(stderr, "loom_sim: bad --workers entry '%s'\n", ws.c_str());
      return 2;
    }
    for (const std::string& wl : List(absl::GetFlag(FLAGS_workloads))) {
      const double abs_rate = absl::GetFlag(FLAGS_rate);
      for (const std::string& ls : abs_rate > 0 ? std::vector<std::string>{"1"}
                                                : List(absl::GetFlag(FLAGS_loads))) {
        double load = 0;
        absl::StatusOr<AdapterWorkload> kind = ParseAdapterWorkload(wl);
        if (!absl::SimpleAtod(ls, &load) || !(load > 0) || !kind.ok()) {
          std::fprintf(stderr, "loom_sim: bad load '%s' or workload '%s'\n", ls.c_str(), wl.c_str());
          return 2;
        }
        WorkloadOptions wo;
        wo.adapters = *kind;
        wo.num_requests = absl::GetFlag(FLAGS_requests) > 0
                              ? absl::GetFlag(FLAGS_requests)
                              : absl::GetFlag(FLAGS_requests_per_worker) * workers;
        wo.seed = absl::GetFlag(FLAGS_seed);
        wo.prompt = prompt_len;
        wo.rate_amplitude = absl::GetFlag(FLAGS_rate_amplitude);
        wo.rate_period_s = absl::GetFlag(FLAGS_rate_period_s);
        wo.output = output_len;
        const double capacity = EstimateCapacityRps(*hw, absl::GetFlag(FLAGS_max_batch_size),
                                                    workers, wo.prompt.mean, wo.output.mean);
        wo.arrival_rate = abs_rate > 0 ? abs_rate : load * capacity;
        if (abs_rate > 0) load = abs_rate / capacity;
        absl::StatusOr<std::vector<SimRequest>> reqs = GenerateWorkload(wo);
        if (!reqs.ok()) {
          std::fprintf(stderr, "loom_sim: %s\n", reqs.status().ToString().c_str());
          return 2;
        }
        for (const std::string& policy : List(absl::GetFlag(FLAGS_policies))) {
          absl::StatusOr<SimReport> rep = RunOne(*hw, workers, policy, *reqs);
          if (!rep.ok()) {
            std::fprintf(stderr, "loom_sim: %s\n", rep.status().ToString().c_str());
            return 1;
          }
          rows.push_back({workers, wl, load, wo.arrival_rate, *rep});
          PrintRow(rows.back());
          std::fflush(stdout);
        }
        grids.emplace_back(workers, wl, load, wo.arrival_rate, *std::move(reqs));
      }
    }
  }
  // Punica vs least-loaded at the same rate.
  std::map<std::tuple<int, std::string, double>, const SimReport*> punica, ll;
  for (const Row& r : rows) {
    if (r.report.policy == "punica") punica[{r.workers, r.workload, r.load}] = &r.report;
    if (r.report.policy == "least_loaded") ll[{r.workers, r.workload, r.load}] = &r.report;
  }
  if (punica.empty() || ll.empty() || json) return 0;
  const bool match = absl::GetFlag(FLAGS_match_p99);
  std::printf("\n| GPUs | workload | load | worker-s least-loaded / punica | p99 punica / least-loaded |%s\n",
              match ? " least-loaded workers to meet punica's p99 | worker-s at that size / punica |" : "");
  std::printf("|---|---|---|---|---|%s\n", match ? "---|---|" : "");
  for (const auto& g : grids) {
    const auto key = std::make_tuple(std::get<0>(g), std::get<1>(g), std::get<2>(g));
    if (!punica.count(key) || !ll.count(key)) continue;
    const SimReport& p = *punica[key];
    const SimReport& l = *ll[key];
    std::printf("| %d | %s | %.0f%% | %.2fx | %.2fx |", std::get<0>(g), std::get<1>(g).c_str(),
                100 * std::get<2>(g), l.worker_seconds / p.worker_seconds,
                p.latency_p99_s / l.latency_p99_s);
    if (match) {
      SimReport sized;
      const int n = LeastLoadedWorkersFor(*hw, std::get<0>(g), p.latency_p99_s, std::get<4>(g), &sized);
      if (n < 0) {
        std::printf(" none | - |");
      } else {
        std::printf(" %d | %.2fx |", n, sized.worker_seconds / p.worker_seconds);
      }
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return loom::Main();
}
