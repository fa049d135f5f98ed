// Batched decode attention of CpuBackend on SmolLM2-135M's geometry (9 query heads over
// 3 kv heads of 64): B sequences of C cached positions each, one decode token per
// sequence, pages in a shuffled order. `layers` distinct K/V pools are cycled, as a model
// step cycles its layers: 1 keeps the cache hot, 30 reads it from DRAM like a real step.
//   bazel run -c opt //kernels/cpu:attention_benchmark
// args: kv dtype (0 f16, 1 int8, 2 int4), layers, B, C, threads. Counters: bytes/s of
// K/V rows read, and tokens/s (B per call).
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/test_util.h"

namespace loom::kernels {
namespace {

void BM_DecodeAttention(benchmark::State& state) {
  const KvDtype dtype = static_cast<KvDtype>(state.range(0));
  const int layers = static_cast<int>(state.range(1)), B = static_cast<int>(state.range(2));
  const int C = static_cast<int>(state.range(3)), threads = static_cast<int>(state.range(4));
  const KvLayout layout{16, 3, 64, dtype};
  const int n_heads = 9, pages_per_seq = (C + 15) / 16;
  std::vector<int32_t> indptr(B + 1), table(static_cast<size_t>(B) * pages_per_seq);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(5));
  for (int s = 0; s <= B; ++s) indptr[s] = s * pages_per_seq;
  std::vector<int32_t> seq_all, pos_all, seq(B), pos(B, C - 1);
  for (int s = 0; s < B; ++s) {
    seq[s] = s;
    for (int p = 0; p < C; ++p) {
      seq_all.push_back(s);
      pos_all.push_back(p);
    }
  }
  auto be = CreateCpuBackend(threads);
  const size_t pool_bytes = table.size() * layout.page_bytes();
  const int kvd = 3 * 64;
  const auto k = testing::RandomFloats(pos_all.size() * kvd, 1, 1.5f);
  const auto v = testing::RandomFloats(pos_all.size() * kvd, 2);
  const AttentionBatch fill{static_cast<int>(pos_all.size()), seq_all.data(), pos_all.data(),
                            indptr.data(), table.data()};
  std::vector<std::vector<uint8_t>> kp(layers, std::vector<uint8_t>(pool_bytes)),
      vp(layers, std::vector<uint8_t>(pool_bytes));
  for (int l = 0; l < layers; ++l) {
    be->AppendKv(layout, fill, k.data(), v.data(), kp[l].data(), vp[l].data());
  }
  const auto q = testing::RandomFloats(static_cast<size_t>(B) * n_heads * 64, 3);
  std::vector<float> out(q.size());
  const AttentionBatch batch{B, seq.data(), pos.data(), indptr.data(), table.data()};
  int l = 0;
  for (auto _ : state) {
    be->PagedAttention(layout, batch, q.data(), n_heads, kp[l].data(), vp[l].data(),
                       out.data());
    benchmark::DoNotOptimize(out.data());
    l = l + 1 == layers ? 0 : l + 1;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * B * C * 3 *
                          static_cast<int64_t>(layout.row_bytes()));
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * B, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{0, 1, 2}, {1, 30}, {32}, {16, 144, 512}, {1, 2}})
    ->UseRealTime()
    ->MinTime(0.3);

}  // namespace
}  // namespace loom::kernels
