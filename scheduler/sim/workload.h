// Synthetic request streams for the simulator: Poisson arrivals, Punica's four adapter
// popularity workloads, and log-normal prompt/output lengths.
//
// Determinism: arrivals, lengths and adapters come from three separate seeded streams,
// and arrival gaps are unit-rate exponentials divided by the rate. So, for one seed, every
// workload and every policy sees the same arrival instants and lengths, and only the
// adapter ids differ between workloads.
#ifndef LOOM_SCHEDULER_SIM_WORKLOAD_H_
#define LOOM_SCHEDULER_SIM_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom {

// Punica's workloads (n = number of requests):
//   Distinct: request i uses adapter i.          Uniform: ceil(sqrt(n)) adapters, equally popular.
//   Skewed: Zipf(alpha) popularity over n ranks.  Identical: one adapter for all.
enum class AdapterWorkload { kDistinct, kUniform, kSkewed, kIdentical };

absl::StatusOr<AdapterWorkload> ParseAdapterWorkload(std::string_view name);
std::string AdapterWorkloadName(AdapterWorkload w);

// kLogNormal: log-normal with the given MEAN (not median) and log-space sigma, rounded
// and clipped to [min, max]. kFixed: always `min` (== max). kUniform: an integer uniform
// in [min, max] (loom_bench's uniform:A:B); `mean` is then (min + max) / 2.
struct LengthDistribution {
  enum Shape { kLogNormal, kFixed, kUniform };
  double mean = 100;
  double sigma = 1.0;
  int min = 1;
  int max = 2048;
  Shape shape = kLogNormal;
};

// Parses "N" (fixed), "uniform:A:B" (as loom_bench's --prompt_len / --max_tokens) or
// "lognormal:MEAN:SIGMA:MIN:MAX". InvalidArgument otherwise (lengths must be >= 1).
absl::StatusOr<LengthDistribution> ParseLengthDistribution(std::string_view spec);

struct WorkloadOptions {
  AdapterWorkload adapters = AdapterWorkload::kDistinct;
  int num_requests = 1000;
  double arrival_rate = 1.0;  // requests per second (Poisson); the MEAN rate if modulated
  // Non-homogeneous Poisson (load that rises and falls, as a day's traffic does): rate(t)
  // = arrival_rate * (1 + rate_amplitude * sin(2 pi t / rate_period_s)), drawn by
  // thinning. rate_amplitude in [0, 1]; 0 = homogeneous (rate_period_s unused).
  double rate_amplitude = 0;
  double rate_period_s = 600;
  // ShareGPT-like defaults: means of 161 prompt and 338 output tokens, the ShareGPT
  // averages reported in the vLLM paper (Punica sampled its lengths from ShareGPT too).
  // The shapes (sigma) are our choice: a long right tail as in chat traces.
  LengthDistribution prompt{161.0, 1.0, 4, 2048};
  LengthDistribution output{338.0, 0.8, 4, 2048};
  double zipf_alpha = 1.5;
  uint64_t seed = 1;
};

struct SimRequest {
  uint64_t id = 0;       // == index in the workload
  double arrival_s = 0;  // ascending
  int adapter = 0;       // adapter index (its name is AdapterName(adapter))
  int prompt_tokens = 0;
  int output_tokens = 0;
};

// InvalidArgument on num_requests < 1, rate <= 0, bad length bounds, alpha <= 1, or a
// modulation outside amplitude [0, 1] / period > 0.
absl::StatusOr<std::vector<SimRequest>> GenerateWorkload(const WorkloadOptions& options);

std::string AdapterName(int adapter);

}  // namespace loom

#endif  // LOOM_SCHEDULER_SIM_WORKLOAD_H_
