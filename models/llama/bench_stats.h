// Small helpers shared by the benchmark binaries (llama_benchmark, lora_benchmark).
#ifndef LOOM_MODELS_LLAMA_BENCH_STATS_H_
#define LOOM_MODELS_LLAMA_BENCH_STATS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
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

// Greedy token of one logits row [n] (first maximum; NaNs are never the maximum). Two
// passes as the engine's sampler does (models/sampling): a max over 8 independent lanes
// (no loop-carried load-compare chain, so the compiler can vectorise it), then the first
// index holding it. std::max_element cost ~3.6% of a batch-32 decode step here.
inline int32_t Argmax(const float* row, int n) {
  float lane[8];
  for (float& l : lane) l = -std::numeric_limits<float>::infinity();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] = row[i + j] > lane[j] ? row[i + j] : lane[j];
  }
  for (; i < n; ++i) lane[0] = row[i] > lane[0] ? row[i] : lane[0];
  float best = lane[0];
  for (int j = 1; j < 8; ++j) best = lane[j] > best ? lane[j] : best;
  for (int k = 0; k < n; ++k) {
    if (row[k] == best) return k;
  }
  return 0;  // every value NaN or -inf
}

}  // namespace loom::bench

#endif  // LOOM_MODELS_LLAMA_BENCH_STATS_H_
