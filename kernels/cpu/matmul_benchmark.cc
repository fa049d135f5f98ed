// MatMul throughput of CpuBackend on SmolLM2-135M shapes, and the machine's read bandwidth.
//   bazel run -c opt //kernels/cpu:matmul_benchmark
// Batch 1 is bandwidth bound: the weights are cycled over copies totalling >= 256 MiB so
// they come from DRAM, not cache; bytes_per_second is weight bytes read. Batched runs
// report ops/s (2 * rows * cols * n per call) as the "ops" counter.
#include <immintrin.h>

#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/thread_pool.h"

namespace loom::kernels {
namespace {

// args: dtype, rows, cols, n, threads, hot
void BM_MatMul(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2);
  const int n = static_cast<int>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  auto be = CreateCpuBackend(threads);
  const size_t bytes = *DTypeRowBytes(t, cols) * rows;
  const bool hot = state.range(5) != 0;  // weights stay in cache (compute rate)
  const int copies = n == 1 && !hot ? static_cast<int>((256u << 20) / bytes + 1) : 1;
  std::vector<testing::TestMatrix> ms;
  for (int c = 0; c < copies; ++c) ms.push_back(testing::RandomMatrix(t, rows, cols, 100 + c));
  const auto x = testing::RandomFloats(static_cast<size_t>(n) * cols, 7);
  ActivationPack pack;
  be->PackActivations(t, x.data(), n, cols, &pack);
  std::vector<float> y(static_cast<size_t>(n) * rows);
  int c = 0;
  for (auto _ : state) {
    be->MatMul(ms[c].w, pack, y.data());
    benchmark::DoNotOptimize(y.data());
    c = c + 1 == copies ? 0 : c + 1;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.counters["ops"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * rows * cols * n,
      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(DTypeName(t)) + " " + std::string(be->name()) +
                (hot ? " cached" : ""));
}

void Shapes(benchmark::internal::Benchmark* b) {
  const int q41 = static_cast<int>(DType::kQ4_1), q80 = static_cast<int>(DType::kQ8_0);
  for (int threads : {1, 2}) {
    for (int n : {1, 8, 32}) {
      b->Args({q41, 576, 576, n, threads, 0});
      b->Args({q41, 192, 576, n, threads, 0});
      b->Args({q41, 1536, 576, n, threads, 0});
      b->Args({q41, 576, 1536, n, threads, 0});
      b->Args({q80, 49152, 576, n, threads, 0});
    }
  }
}
void HotShapes(benchmark::internal::Benchmark* b) {
  b->Args({static_cast<int>(DType::kQ4_1), 576, 576, 1, 1, 1});
  b->Args({static_cast<int>(DType::kQ8_0), 576, 576, 1, 1, 1});
}
BENCHMARK(BM_MatMul)->Apply(HotShapes)->UseRealTime()->MinTime(0.3);
BENCHMARK(BM_MatMul)->Apply(Shapes)->UseRealTime()->MinTime(0.3);

// Model-shaped step: all 211 matrices of SmolLM2-135M (30 layers of 7 Q4_1 projections
// and the Q8_0 output matrix) for n rows; tokens/s = n * iterations/s.
void BM_ModelStep(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  auto be = CreateCpuBackend(threads);
  struct Proj { int64_t rows, cols; };
  const Proj layer[] = {{576, 576}, {192, 576}, {192, 576}, {576, 576},
                        {1536, 576}, {1536, 576}, {576, 1536}};
  std::vector<testing::TestMatrix> ms;
  for (int l = 0; l < 30; ++l) {
    for (const Proj& p : layer) ms.push_back(testing::RandomMatrix(DType::kQ4_1, p.rows, p.cols, l * 7 + ms.size()));
  }
  ms.push_back(testing::RandomMatrix(DType::kQ8_0, 49152, 576, 999));
  const auto x = testing::RandomFloats(static_cast<size_t>(n) * 1536, 7);
  ActivationPack p576, p1536;
  std::vector<float> y(static_cast<size_t>(n) * 49152);
  int64_t bytes = 0;
  for (const auto& m : ms) bytes += m.w.rows * m.w.row_bytes;
  for (auto _ : state) {
    for (const auto& m : ms) {
      ActivationPack& p = m.w.cols == 576 ? p576 : p1536;
      be->PackActivations(m.w.dtype, x.data(), n, static_cast<int>(m.w.cols), &p);
      be->MatMul(m.w, p, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ModelStep)
    ->ArgsProduct({{1, 8, 32}, {1, 2}})
    ->UseRealTime()
    ->MinTime(1.0);

__attribute__((target("avx2"))) int64_t SumRange(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) int64_t o[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(o), a0);
  return o[0] + o[1] + o[2] + o[3];
}

// Read bandwidth with vector loads over 512 MiB, split over `threads` threads.
void BM_MemRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const size_t size = 512u << 20;
  std::unique_ptr<uint8_t, decltype(&free)> buf(static_cast<uint8_t*>(aligned_alloc(64, size)),
                                                &free);
  std::memset(buf.get(), 1, size);
  ThreadPool pool(threads);
  std::vector<int64_t> sums(threads);
  const size_t per = size / threads;
  for (auto _ : state) {
    pool.ParallelFor(threads, 1, [&](int64_t b, int64_t) {
      sums[b] = SumRange(buf.get() + b * per, per);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * size);
}
BENCHMARK(BM_MemRead)->Arg(1)->Arg(2)->UseRealTime()->MinTime(1.0);

}  // namespace
}  // namespace loom::kernels
