// Atom MatMul throughput vs CpuBackend's F32 and Q4_1 MatMul on SmolLM2-135M shapes.
//   bazel run -c opt //kernels/cpu/quant:atom_matmul_benchmark -- --benchmark_filter=...
// Each case runs one [n, K] x [N, K]^T product; activations are prepared outside the
// timed loop (Atom: quantized; Q4_1: PackActivations; BM_AtomQuantize times that step).
// At n == 1 the weights are cycled over copies totalling >= 256 MiB so they come from
// DRAM. Counters: ops = 2 * N * K * n per call (rate), tok/s-relevant: n * calls/s.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/quant/cpu_atom_kernels.h"
#include "kernels/dtype.h"
#include "kernels/quant/atom_test_util.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::quant {
namespace {

void Report(benchmark::State& state, int64_t rows, int64_t cols, int n, size_t bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.counters["ops"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * rows * cols * n, benchmark::Counter::kIsRate);
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * n,
                                                benchmark::Counter::kIsRate);
}

// A random N x K matrix of type t (kF32 or kQ4_1) owning its bytes.
struct Matrix {
  std::vector<uint8_t> storage;
  WeightMatrix w;
};
Matrix RandomMatrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const size_t rb = *DTypeRowBytes(t, cols);
  m.storage.resize(rb * rows);
  m.w = WeightMatrix{t, rows, cols, m.storage.data(), rb};
  std::mt19937 rng(seed);
  if (t == DType::kF32) {
    const std::vector<float> v = testing::RandomValues(rows * cols, seed, 1.0f);
    std::memcpy(m.storage.data(), v.data(), v.size() * 4);
  } else {
    auto* b = reinterpret_cast<BlockQ4_1*>(m.storage.data());
    for (int64_t i = 0; i < rows * cols / 32; ++i) {
      b[i].d = Fp32ToFp16(0.01f);
      b[i].m = Fp32ToFp16(-0.05f);
      for (int j = 0; j < 16; ++j) b[i].qs[j] = static_cast<uint8_t>(rng());
    }
  }
  return m;
}

int Copies(int n, size_t bytes) { return n == 1 ? static_cast<int>((256u << 20) / bytes + 1) : 1; }

// args: w_bits, a_bits, N (rows), K (cols), n, threads, row blocks (1: Prepare'd weights,
// 0: the plain views), group. 64 outliers at K=576, 128 at 1536.
void BM_AtomMatMul(benchmark::State& state) {
  const int wb = static_cast<int>(state.range(0)), ab = static_cast<int>(state.range(1));
  const int64_t rows = state.range(2);
  const int k = static_cast<int>(state.range(3)), n = static_cast<int>(state.range(4));
  ThreadPool pool(static_cast<int>(state.range(5)));
  const bool row_blocks = state.range(6) != 0;
  const int group = static_cast<int>(state.range(7));
  auto ak = CreateCpuAtomKernels(&pool);
  const QuantSpec spec{k, k == 576 ? 64 : 128, group, wb, ab};
  const std::vector<float> wf = testing::RandomValues(static_cast<size_t>(rows) * k, 3, 0.05f);
  const AtomWeight w0 = *QuantizeWeightRTN(wf.data(), rows, spec);
  const size_t bytes = w0.q.size() + w0.q_outlier.size() + 4 * (w0.scales.size() + w0.outlier_scales.size());
  std::vector<AtomWeight> ws(Copies(n, bytes), w0);
  std::vector<AtomWeightView> views;
  std::vector<std::unique_ptr<PreparedAtomWeight>> prepared;
  for (const AtomWeight& w : ws) {
    views.push_back(w.view());
    if (row_blocks) {
      prepared.push_back(ak->Prepare(views.back()));
      views.back().prepared = prepared.back().get();
    }
  }
  const std::vector<float> x = testing::RandomValues(static_cast<size_t>(n) * k, 7);
  AtomActivations a;
  ak->Quantize(x.data(), n, nullptr, spec, &a, nullptr);
  std::vector<float> y(static_cast<size_t>(n) * rows);
  size_t c = 0;
  for (auto _ : state) {
    ak->MatMul(views[c], a, y.data());
    benchmark::DoNotOptimize(y.data());
    c = c + 1 == ws.size() ? 0 : c + 1;
  }
  Report(state, rows, k, n, bytes);
  state.SetLabel(std::string(ak->name()) + " w" + std::to_string(wb) + "a" + std::to_string(ab) +
                 " g" + std::to_string(group) + (row_blocks ? " row-blocks" : " views"));
}

// args: dtype, N, K, n, threads (CpuBackend's MatMul, as the model runs it today).
void BM_BackendMatMul(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const int64_t rows = state.range(1), k = state.range(2);
  const int n = static_cast<int>(state.range(3));
  ThreadPool pool(static_cast<int>(state.range(4)));
  auto be = CreateCpuBackendOnPool(&pool);
  const size_t bytes = *DTypeRowBytes(t, k) * rows;
  std::vector<Matrix> ms;
  for (int c = 0; c < Copies(n, bytes); ++c) ms.push_back(RandomMatrix(t, rows, k, 100 + c));
  const std::vector<float> x = testing::RandomValues(static_cast<size_t>(n) * k, 7);
  ActivationPack pack;
  be->PackActivations(t, x.data(), n, static_cast<int>(k), &pack);
  std::vector<float> y(static_cast<size_t>(n) * rows);
  size_t c = 0;
  for (auto _ : state) {
    be->MatMul(ms[c].w, pack, y.data());
    benchmark::DoNotOptimize(y.data());
    c = c + 1 == ms.size() ? 0 : c + 1;
  }
  Report(state, rows, k, n, bytes);
  state.SetLabel(std::string(DTypeName(t)) + " " + std::string(be->name()));
}

// args: K, n, threads: RmsNormQuantize (with a permutation) of n rows.
void BM_AtomRmsNormQuantize(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1));
  ThreadPool pool(static_cast<int>(state.range(2)));
  auto ak = CreateCpuAtomKernels(&pool);
  const QuantSpec spec{k, k == 576 ? 64 : 128, 128, 4, 4};
  const std::vector<float> x = testing::RandomValues(static_cast<size_t>(n) * k, 7);
  const std::vector<float> gamma = testing::RandomValues(k, 8);
  std::vector<int32_t> perm(k);
  for (int j = 0; j < k; ++j) perm[j] = (j * 7) % k == j ? j : (k - 1 - j);
  AtomActivations a;
  std::vector<float> normed(x.size());
  for (auto _ : state) {
    ak->RmsNormQuantize(x.data(), gamma.data(), n, 1e-5f, perm.data(), spec, &a, normed.data());
    benchmark::DoNotOptimize(a.q.data());
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * n,
                                                benchmark::Counter::kIsRate);
}

// The 30 layers' seven projections of SmolLM2-135M (no attention, no output layer) for n
// tokens, with the activation steps each path needs: Atom = RmsNormQuantize (q/k/v and
// gate/up inputs), Quantize (o input), SiluMulQuantize (down input) + MatMuls; backend =
// RmsNorm / SiluMul + PackActivations + MatMul with Q4_1 weights (as the model runs today).
// Counter tok/s = n * steps/s. args: atom (1) or Q4_1 (0), n, threads.
struct Proj {
  int64_t rows;
  int k;
};
constexpr Proj kLayer[] = {{576, 576}, {192, 576}, {192, 576}, {576, 576},
                           {1536, 576}, {1536, 576}, {576, 1536}};

void BM_LayerStack(benchmark::State& state) {
  const bool atom = state.range(0) != 0;
  const int n = static_cast<int>(state.range(1));
  ThreadPool pool(static_cast<int>(state.range(2)));
  const std::vector<float> x = testing::RandomValues(static_cast<size_t>(n) * 1536, 7);
  const std::vector<float> gamma = testing::RandomValues(576, 8);
  std::vector<float> y(static_cast<size_t>(n) * 1536), normed(static_cast<size_t>(n) * 1536);
  if (atom) {
    auto ak = CreateCpuAtomKernels(&pool);
    const QuantSpec s576{576, 64, 128, 4, 4}, s1536{1536, 128, 128, 4, 4};
    std::vector<AtomWeight> ws;
    for (int l = 0; l < 30; ++l) {
      for (const Proj& p : kLayer) {
        const QuantSpec& s = p.k == 576 ? s576 : s1536;
        const std::vector<float> wf = testing::RandomValues(p.rows * p.k, l * 7 + ws.size(), 0.05f);
        ws.push_back(*QuantizeWeightRTN(wf.data(), p.rows, s));
      }
    }
    AtomActivations a;
    for (auto _ : state) {
      for (int l = 0; l < 30; ++l) {
        const AtomWeight* lw = ws.data() + 7 * l;
        ak->RmsNormQuantize(x.data(), gamma.data(), n, 1e-5f, nullptr, s576, &a, normed.data());
        for (int i = 0; i < 3; ++i) ak->MatMul(lw[i].view(), a, y.data());
        ak->Quantize(x.data(), n, nullptr, s576, &a, nullptr);
        ak->MatMul(lw[3].view(), a, y.data());
        ak->RmsNormQuantize(x.data(), gamma.data(), n, 1e-5f, nullptr, s576, &a, normed.data());
        for (int i = 4; i < 6; ++i) ak->MatMul(lw[i].view(), a, y.data());
        ak->SiluMulQuantize(x.data(), x.data(), n, s1536, &a, normed.data());
        ak->MatMul(lw[6].view(), a, y.data());
      }
      benchmark::DoNotOptimize(y.data());
    }
  } else {
    auto be = CreateCpuBackendOnPool(&pool);
    std::vector<Matrix> ms;
    for (int l = 0; l < 30; ++l) {
      for (const Proj& p : kLayer) ms.push_back(RandomMatrix(DType::kQ4_1, p.rows, p.k, l * 7 + ms.size()));
    }
    ActivationPack pack;
    for (auto _ : state) {
      for (int l = 0; l < 30; ++l) {
        for (int i = 0; i < 7; ++i) {
          const Matrix& m = ms[7 * l + i];
          const int k = static_cast<int>(m.w.cols);
          if (i == 0 || i == 4) {  // RMSNorm output feeds q/k/v and gate/up
            be->RmsNorm(x.data(), gamma.data(), n, k, 1e-5f, normed.data());
            be->PackActivations(DType::kQ4_1, normed.data(), n, k, &pack);
          } else if (i == 3) {  // attention output feeds o
            be->PackActivations(DType::kQ4_1, x.data(), n, k, &pack);
          } else if (i == 6) {  // SiLU(gate) * up feeds down
            be->SiluMul(x.data(), x.data(), static_cast<int64_t>(n) * k, normed.data());
            be->PackActivations(DType::kQ4_1, normed.data(), n, k, &pack);
          }
          be->MatMul(m.w, pack, y.data());
        }
      }
      benchmark::DoNotOptimize(y.data());
    }
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * n,
                                               benchmark::Counter::kIsRate);
  state.SetLabel(atom ? "atom w4a4" : "Q4_1");
}
BENCHMARK(BM_LayerStack)->ArgsProduct({{1, 0}, {1, 8, 32}, {1, 2}})->UseRealTime()->MinTime(0.5);

constexpr int kShapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}};  // {N, K}

void AtomArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int n : {1, 8, 32}) {
      for (const auto& s : kShapes) {
        for (int blocks : {0, 1}) {
          b->Args({4, 4, s[0], s[1], n, threads, blocks, 128});
          b->Args({4, 4, s[0], s[1], n, threads, blocks, 64});
          b->Args({4, 8, s[0], s[1], n, threads, blocks, 128});
          b->Args({8, 8, s[0], s[1], n, threads, blocks, 128});
        }
      }
    }
  }
}
void BackendArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int n : {1, 8, 32}) {
      for (const auto& s : kShapes) {
        b->Args({static_cast<int>(DType::kF32), s[0], s[1], n, threads});
        b->Args({static_cast<int>(DType::kQ4_1), s[0], s[1], n, threads});
      }
    }
  }
}
BENCHMARK(BM_AtomMatMul)->Apply(AtomArgs)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_BackendMatMul)->Apply(BackendArgs)->UseRealTime()->MinTime(0.2);
// The output head of SmolLM2 (vocab 49152 x hidden 576) at batch-32 decode: the GGUF's
// Q8_0 as stored (what every scheme runs today) against Atom INT8 / INT4 weights.
void HeadArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int blocks : {0, 1}) {
      b->Args({8, 8, 49152, 576, 32, threads, blocks, 256});
      b->Args({4, 8, 49152, 576, 32, threads, blocks, 128});
    }
  }
}
void HeadBackendArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({static_cast<int>(DType::kQ8_0), 49152, 576, 32, threads});
    b->Args({static_cast<int>(DType::kF32), 49152, 576, 32, threads});
  }
}
BENCHMARK(BM_AtomMatMul)->Name("BM_HeadAtom")->Apply(HeadArgs)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_BackendMatMul)->Name("BM_HeadBackend")->Apply(HeadBackendArgs)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_AtomRmsNormQuantize)
    ->ArgsProduct({{576, 1536}, {1, 32}, {1, 2}})
    ->UseRealTime()
    ->MinTime(0.2);

// The online rotation's cost: the activation step of o (Quantize vs HadamardQuantize,
// K = 576) and of down (SiluMulQuantize vs SiluMulHadamardQuantize, K = 1536) for n rows,
// groups of 64, 64 INT8 outliers kept out of the rotation (so the rotated widths are
// 512 = 2^9 and 1472 = 23 blocks of 64). args: K, n, threads, rotate (0/1).
void BM_ActivationStep(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1));
  const bool rotate = state.range(3) != 0;
  ThreadPool pool(static_cast<int>(state.range(2)));
  auto ak = CreateCpuAtomKernels(&pool);
  const QuantSpec spec{k, 64, 64, 4, 4};
  const HadamardTransform t = *HadamardTransform::CreateFullOrBlocked(k - 64);
  const std::vector<float> x = testing::RandomValues(static_cast<size_t>(n) * k, 7);
  const std::vector<float> up = testing::RandomValues(static_cast<size_t>(n) * k, 9);
  std::vector<int32_t> perm(k);
  for (int j = 0; j < k; ++j) perm[j] = (j * 7) % k == j ? j : (k - 1 - j);
  AtomActivations a;
  std::vector<float> out(x.size());
  for (auto _ : state) {
    if (k == 576) {
      if (rotate) {
        ak->HadamardQuantize(x.data(), n, t, perm.data(), spec, &a, out.data());
      } else {
        ak->Quantize(x.data(), n, perm.data(), spec, &a, out.data());
      }
    } else if (rotate) {
      ak->SiluMulHadamardQuantize(x.data(), up.data(), n, t, perm.data(), spec, &a, out.data());
    } else {
      ak->SiluMulQuantize(x.data(), up.data(), n, spec, &a, out.data());
    }
    benchmark::DoNotOptimize(a.q.data());
  }
  state.SetLabel(rotate ? "rotated" : "plain");
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * n,
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ActivationStep)
    ->ArgsProduct({{576, 1536}, {1, 32}, {1, 2}, {0, 1}})
    ->UseRealTime()
    ->MinTime(0.2);

}  // namespace
}  // namespace loom::kernels::quant
