// Small helpers shared by the benchmark binaries (llama_benchmark, lora_benchmark).
#ifndef LOOM_MODELS_LLAMA_BENCH_STATS_H_
#define LOOM_MODELS_LLAMA_BENCH_STATS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace loom::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Median of a non-empty sample.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Greedy token of one logits row [n] (first maximum).
inline int32_t Argmax(const float* row, int n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace loom::bench

#endif  // LOOM_MODELS_LLAMA_BENCH_STATS_H_
