// Workload generators for loom-bench: which adapter each request names (Punica's four
// workloads), when requests arrive (open-loop Poisson), and how long prompts and outputs
// are. Deterministic given the caller's RNG; no I/O.
//
// Punica's workloads over a pool of N adapters (ids <prefix>0 .. <prefix>N-1):
//   identical  every request uses adapter 0
//   distinct   request i uses adapter i mod N (all different while i < N)
//   uniform    ~sqrt(R) adapters for R expected requests (clamped to [1, N]), each
//              equally likely
//   skewed     Zipf: P(adapter k) proportional to (k+1)^-alpha, alpha = 1.5
#ifndef LOOM_CLIENTS_BENCH_WORKLOAD_H_
#define LOOM_CLIENTS_BENCH_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace loom::bench {

using Rng = std::mt19937_64;

enum class Workload { kIdentical, kDistinct, kUniform, kSkewed };

// "identical" | "distinct" | "uniform" | "skewed"; InvalidArgument otherwise.
absl::StatusOr<Workload> ParseWorkload(absl::string_view name);
const char* WorkloadName(Workload w);

// round(sqrt(expected_requests)) clamped to [1, pool].
int UniformAdapterCount(int64_t expected_requests, int pool);

// Zipf over {0, .., n-1}: P(k) = (k+1)^-alpha / sum_j (j+1)^-alpha. Sampled by inverting
// the cumulative distribution (binary search).
class ZipfDistribution {
 public:
  ZipfDistribution(int n, double alpha);  // n >= 1, alpha >= 0
  int operator()(Rng& rng) const;
  double Probability(int k) const;
  int size() const { return static_cast<int>(cdf_.size()); }

 private:
  std::vector<double> cdf_;  // cdf_[k] = P(X <= k); cdf_.back() == 1
};

class AdapterPicker {
 public:
  // pool >= 1 adapters; expected_requests sizes the uniform workload.
  static absl::StatusOr<AdapterPicker> Create(Workload workload, int pool,
                                              int64_t expected_requests,
                                              double zipf_alpha = 1.5);
  // Index of the next request's adapter, in [0, pool).
  int Next(Rng& rng);
  // How many different adapters this picker can return.
  int adapters_in_use() const { return in_use_; }

 private:
  AdapterPicker(Workload w, int pool, int in_use, double alpha)
      : workload_(w), pool_(pool), in_use_(in_use), zipf_(in_use, alpha) {}
  Workload workload_;
  int pool_;
  int in_use_;
  int64_t counter_ = 0;
  ZipfDistribution zipf_;
};

// Open-loop Poisson arrivals: exponential inter-arrival gaps with mean 1 / rate.
class PoissonArrivals {
 public:
  explicit PoissonArrivals(double rate_per_second) : dist_(rate_per_second) {}
  double NextGapSeconds(Rng& rng) { return dist_(rng); }

 private:
  std::exponential_distribution<double> dist_;
};

// A token-count distribution, parsed from
//   "N"              always N
//   "uniform:A:B"    uniform integer in [A, B]
//   "exp:MEAN:MAX"   1 + exponential with mean MEAN-1, clamped to [1, MAX]
class LengthDistribution {
 public:
  static absl::StatusOr<LengthDistribution> Parse(absl::string_view spec);
  int Sample(Rng& rng) const;
  double Mean() const;  // the analytical mean (exp: before clamping)
  std::string ToString() const;

 private:
  enum class Kind { kFixed, kUniform, kExp };
  Kind kind_ = Kind::kFixed;
  int a_ = 1, b_ = 1;
  double mean_ = 1;
};

// A prompt of `words` common English words (each one GPT-2 / SmolLM2 BPE token with its
// leading space), so its length in tokens is close to `words`.
std::string MakeWordPrompt(int words, Rng& rng);

// Linear-interpolated percentile (numpy's default): p in [0, 100]. 0 for no values.
double Percentile(std::vector<double> values, double p);

}  // namespace loom::bench

#endif  // LOOM_CLIENTS_BENCH_WORKLOAD_H_
