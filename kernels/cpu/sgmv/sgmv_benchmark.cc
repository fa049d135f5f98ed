// SGMV (shrink + expand of one projection) on SmolLM2-135M shapes, rank 16, 32 tokens, in
// Punica's four workloads, against a gather-per-token baseline; and the machine's read
// bandwidth for comparison.
//   bazel run //kernels/cpu/sgmv:sgmv_benchmark   (.bazelrc builds with -O2)
//
// Adapters are cycled over a 256 MiB pool so that each call reads its adapters from DRAM
// (in a real step every projection of every layer has its own, cold, weights).
// cold = 0 reuses the same adapters every call (cache-resident: the compute cost alone).
// Counters: distinct = adapters read per call; adapter_bytes = their A + B bytes;
// adapter_GBps = adapter_bytes / time per call (bytes_per_second in GB/s terms).
//
// Workloads (32 tokens, sorted by adapter):
//   0 None: no token has an adapter (the cost of LoRA being absent)
//   1 Identical: one segment of 32 tokens
//   2 Distinct: 32 segments of 1 token, 32 adapters
//   3 Uniform: 6 adapters, segments 6 6 5 5 5 5
//   4 Skewed: Zipf(alpha 1.5) over 32 adapters, seeded
// Shapes: 0 q/o 576->576, 1 k/v 576->192, 2 gate/up 576->1536, 3 down 1536->576.
//
// Measured (2-core AMD EPYC Zen 3 VM, AVX2, shared with other builds; 1 thread, cold, us
// per call): read bandwidth 13.4-15.3 GB/s. q/o: None 0.09, Identical 35, Distinct 113
// (10.4 GB/s of adapter bytes = 1.38x the bytes / bandwidth time), Uniform 60, Skewed 69;
// gather baseline 95 / 177 / 112 / 134. gate/up: Distinct 207 (1.38x), baseline 345.
// 2-thread runs were not meaningful there (the second core was busy: 2-thread read
// bandwidth was no higher than 1-thread).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/lora_ops.h"

namespace loom::kernels {
namespace {

constexpr int kTokens = 32;
constexpr int kRank = 16;
constexpr size_t kPoolBytes = size_t{256} << 20;

struct ProjShape {
  int h_in, h_out;
};
constexpr ProjShape kShapes[] = {{576, 576}, {576, 192}, {576, 1536}, {1536, 576}};

// 256 MiB of random BF16 in [-1, 1) (xorshift; contents do not matter for timing).
const std::vector<uint16_t>& PoolStorage() {
  static const std::vector<uint16_t>* pool = [] {
    auto* p = new std::vector<uint16_t>(kPoolBytes / 2);
    uint32_t s = 2463534242u;
    for (uint16_t& h : *p) {
      s ^= s << 13;
      s ^= s >> 17;
      s ^= s << 5;
      // sign | exponent 120..126 | 7 mantissa bits: magnitudes in [2^-7, 1)
      h = static_cast<uint16_t>((s & 0x8000u) | ((120u + (s >> 16) % 7u) << 7) | (s & 0x7Fu));
    }
    return p;
  }();
  return *pool;
}

// LoraPairs carved from the pool storage, each A followed by its B.
std::vector<LoraPair> PoolAdapters(const ProjShape& sh) {
  const size_t a_elems = static_cast<size_t>(kRank) * sh.h_in;
  const size_t b_elems = static_cast<size_t>(sh.h_out) * kRank;
  const std::vector<uint16_t>& st = PoolStorage();
  std::vector<LoraPair> out;
  for (size_t off = 0; off + a_elems + b_elems <= st.size(); off += a_elems + b_elems) {
    out.push_back(LoraPair{st.data() + off, st.data() + off + a_elems, kRank, 2.0f});
  }
  return out;
}

// Adapter slot (0-based within the call) of each token, ascending; -1 = none.
std::vector<int> WorkloadSlots(int workload) {
  std::vector<int> slot(kTokens);
  switch (workload) {
    case 0: std::fill(slot.begin(), slot.end(), -1); break;
    case 1: std::fill(slot.begin(), slot.end(), 0); break;
    case 2: for (int t = 0; t < kTokens; ++t) slot[t] = t; break;
    case 3: {
      const int lens[] = {6, 6, 5, 5, 5, 5};
      int t = 0;
      for (int s = 0; s < 6; ++s) for (int i = 0; i < lens[s]; ++i) slot[t++] = s;
      break;
    }
    default: {
      std::vector<double> w(kTokens);
      for (int i = 0; i < kTokens; ++i) w[i] = 1.0 / std::pow(i + 1, 1.5);
      std::mt19937 rng(42);
      std::discrete_distribution<int> zipf(w.begin(), w.end());
      for (int& s : slot) s = zipf(rng);
      std::sort(slot.begin(), slot.end());
      // Renumber to dense 0..distinct-1.
      int next = -1, prev = -1;
      for (int& s : slot) {
        if (s != prev) { prev = s; ++next; }
        s = next;
      }
    }
  }
  return slot;
}

int Distinct(const std::vector<int>& slot) {
  int d = 0;
  for (int s : slot) d = std::max(d, s + 1);
  return d;
}

struct Setup {
  ProjShape sh;
  std::vector<LoraPair> pool;
  std::vector<int> slot;
  int distinct;
  std::vector<float> x, v, y;
  std::unique_ptr<ThreadPool> threads;
  std::unique_ptr<LoraOps> ops;

  Setup(const benchmark::State& state)
      : sh(kShapes[state.range(2)]), pool(PoolAdapters(sh)), slot(WorkloadSlots(state.range(0))),
        distinct(Distinct(slot)), x(kTokens * sh.h_in, 0.01f), v(kTokens * kRank),
        y(kTokens * sh.h_out) {
    if (state.range(1) > 1) threads = std::make_unique<ThreadPool>(state.range(1));
    ops = CreateCpuLoraOps(threads.get());
  }
  size_t AdapterBytes() const {
    return static_cast<size_t>(distinct) * kRank * (sh.h_in + sh.h_out) * 2;
  }
  void Report(benchmark::State& state) const {
    state.counters["distinct"] = distinct;
    state.counters["adapter_bytes"] = static_cast<double>(AdapterBytes());
    state.counters["adapter_GBps"] = benchmark::Counter(
        static_cast<double>(AdapterBytes()) * state.iterations() / 1e9,
        benchmark::Counter::kIsRate);
  }
};

// args: workload, threads, shape, cold
void BM_Sgmv(benchmark::State& state) {
  Setup s(state);
  std::vector<LoraSegment> segs;
  size_t base = 0;
  for (auto _ : state) {
    // Segments of this call: runs of equal slots, each slot -> pool[base + slot].
    segs.clear();
    for (int t = 0; t < kTokens;) {
      int e = t + 1;
      while (e < kTokens && s.slot[e] == s.slot[t]) ++e;
      segs.push_back(LoraSegment{t, e, s.slot[t] < 0 ? nullptr : &s.pool[base + s.slot[t]]});
      t = e;
    }
    s.ops->SgmvShrink(s.x.data(), s.sh.h_in, segs.data(), static_cast<int>(segs.size()),
                      s.v.data(), kRank);
    s.ops->SgmvExpand(s.v.data(), kRank, segs.data(), static_cast<int>(segs.size()),
                      s.sh.h_out, s.y.data());
    benchmark::DoNotOptimize(s.y.data());
    if (state.range(3)) base += std::max(s.distinct, 1);
    if (base + s.distinct > s.pool.size()) base = 0;
  }
  s.Report(state);
}

// Punica's gather baseline: each token's adapter A and B are copied ("gathered") into a
// contiguous per-token buffer [32][A | B], then a dense per-token matvec (the same dot
// kernels, one token per segment, so only the gather differs).
void BM_GatherBaseline(benchmark::State& state) {
  Setup s(state);
  const size_t a_elems = static_cast<size_t>(kRank) * s.sh.h_in;
  const size_t b_elems = static_cast<size_t>(s.sh.h_out) * kRank;
  std::vector<uint16_t> gathered(kTokens * (a_elems + b_elems));
  std::vector<LoraPair> per_token(kTokens);
  std::vector<LoraSegment> segs(kTokens);
  size_t base = 0;
  for (auto _ : state) {
    for (int t = 0; t < kTokens; ++t) {
      if (s.slot[t] < 0) {
        segs[t] = LoraSegment{t, t + 1, nullptr};
        continue;
      }
      const LoraPair& src = s.pool[base + s.slot[t]];
      uint16_t* dst = gathered.data() + t * (a_elems + b_elems);
      std::memcpy(dst, src.a, a_elems * 2);
      std::memcpy(dst + a_elems, src.b, b_elems * 2);
      per_token[t] = LoraPair{dst, dst + a_elems, kRank, src.scale};
      segs[t] = LoraSegment{t, t + 1, &per_token[t]};
    }
    s.ops->SgmvShrink(s.x.data(), s.sh.h_in, segs.data(), kTokens, s.v.data(), kRank);
    s.ops->SgmvExpand(s.v.data(), kRank, segs.data(), kTokens, s.sh.h_out, s.y.data());
    benchmark::DoNotOptimize(s.y.data());
    if (state.range(3)) base += std::max(s.distinct, 1);
    if (base + s.distinct > s.pool.size()) base = 0;
  }
  s.Report(state);
}

// Read bandwidth: sums the 256 MiB pool with 256-bit loads and 4 accumulators, split over
// the threads. bytes_per_second = the machine's read bandwidth on that many threads.
__attribute__((target("avx2"))) float SumRange(const uint16_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 16)));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 48)));
  }
  const __m256i r = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<float>(_mm256_extract_epi32(r, 0));
}

void BM_ReadBandwidth(benchmark::State& state) {
  const std::vector<uint16_t>& st = PoolStorage();
  const int n_threads = static_cast<int>(state.range(0));
  ThreadPool pool(n_threads);
  const int64_t chunk = static_cast<int64_t>(st.size()) / n_threads;
  std::vector<float> sink(n_threads);
  for (auto _ : state) {
    pool.ParallelFor(n_threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sink[i] = SumRange(st.data() + i * chunk, chunk);
    });
    benchmark::DoNotOptimize(sink.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kPoolBytes);
}

void WorkloadArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"workload", "threads", "shape", "cold"});
  for (int cold : {1, 0})
    for (int shape = 0; shape < 4; ++shape)
      for (int threads : {1, 2})
        for (int w = 0; w < 5; ++w) b->Args({w, threads, shape, cold});
}

BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sgmv)->Apply(WorkloadArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GatherBaseline)->Apply(WorkloadArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace loom::kernels
