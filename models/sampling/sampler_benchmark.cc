// Sample() cost on a SmolLM2-sized vocabulary (49152) with realistic logits.
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "models/sampling/sampler.h"

namespace loom {
namespace {

constexpr int kVocab = 49152;

// Roughly LM-shaped logits: mostly N(0, 2), a few strong candidates.
std::vector<float> MakeLogits() {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = normal(rng);
  for (int i = 0; i < 8; ++i) logits[rng() % kVocab] = 12.0f - i;
  return logits;
}

void Run(benchmark::State& state, SamplingOptions options) {
  options.has_seed = true;
  options.seed = 7;
  Sampler sampler = *Sampler::Create(options);
  const std::vector<float> logits = MakeLogits();
  std::vector<int32_t> history(256);
  for (size_t i = 0; i < history.size(); ++i) history[i] = static_cast<int32_t>(i * 97 % kVocab);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.Sample(logits, history));
}

void BM_Greedy(benchmark::State& state) { Run(state, SamplingOptions()); }

void BM_TopP09(benchmark::State& state) {
  SamplingOptions o;
  o.temperature = 0.8f;
  o.top_p = 0.9f;
  Run(state, o);
}

void BM_TopK40(benchmark::State& state) {
  SamplingOptions o;
  o.temperature = 0.8f;
  o.top_k = 40;
  Run(state, o);
}

void BM_TopK40TopP09Penalties(benchmark::State& state) {
  SamplingOptions o;
  o.temperature = 0.8f;
  o.top_k = 40;
  o.top_p = 0.9f;
  o.repetition_penalty = 1.1f;
  o.presence_penalty = 0.5f;
  Run(state, o);
}

void BM_FullSoftmax(benchmark::State& state) {
  SamplingOptions o;
  o.temperature = 1.0f;
  Run(state, o);
}

void BM_TopLogprobs5(benchmark::State& state) {
  const std::vector<float> logits = MakeLogits();
  for (auto _ : state) benchmark::DoNotOptimize(Sampler::TopLogprobs(logits, 5));
}

BENCHMARK(BM_Greedy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopP09)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopK40)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopK40TopP09Penalties)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FullSoftmax)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopLogprobs5)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace loom
