// SGMV latency on the GPU: one LoRA operator (shrink + expand, h_in = h_out = 4096,
// rank 16, BF16 weights, FP32 activations) for batch 1..64 in Punica's four workloads:
//   Distinct  (each token its own adapter), Uniform (ceil(sqrt(n)) adapters, equal
//   popularity), Skewed (Zipf alpha 1.5 over n adapters, seed 1), Identical (one).
// Adapters rotate through a 1024-adapter (256 MiB) pool so each call reads cold weights.
// Prints a table (microseconds per operator, median of 7 runs of 200 calls, CUDA events)
// and the adapter bytes read per call / time (GB/s). Exit code 2 without a GPU.
//   bazel run --config=cuda //kernels/cuda:sgmv_gpu_benchmark
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_lora_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/lora_ops.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kH = 4096;
constexpr int kRank = 16;
constexpr int kPool = 1024;
constexpr int kRotations = 16;
constexpr int kCalls = 200;
constexpr int kRuns = 7;

// Adapter slot per token (sorted, so equal slots are contiguous).
std::vector<int> Slots(const char* workload, int n, std::mt19937& rng) {
  std::vector<int> slot(n, 0);
  const std::string w = workload;
  if (w == "Distinct") {
    for (int i = 0; i < n; ++i) slot[i] = i;
  } else if (w == "Uniform") {
    const int k = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
    for (int i = 0; i < n; ++i) slot[i] = i % k;
  } else if (w == "Skewed") {
    std::vector<double> p(n);
    for (int i = 0; i < n; ++i) p[i] = 1.0 / std::pow(i + 1, 1.5);
    std::discrete_distribution<int> zipf(p.begin(), p.end());
    for (int& s : slot) s = zipf(rng);
  }
  std::sort(slot.begin(), slot.end());
  return slot;
}

int Run() {
  const absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    std::printf("no CUDA device: %s\n", count.status().ToString().c_str());
    return 2;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  const size_t a_elems = size_t{kRank} * kH, b_elems = size_t{kH} * kRank;
  auto weights = DeviceBuffer<uint16_t>::Allocate(kPool * (a_elems + b_elems));
  if (!weights.ok()) return 1;
  {  // BF16 1/64 everywhere (contents do not matter for timing)
    std::vector<uint16_t> host(kPool * (a_elems + b_elems), 0x3C80);
    if (!weights->CopyFromHost(host).ok()) return 1;
  }
  std::vector<LoraPair> pairs(kPool);
  for (int i = 0; i < kPool; ++i) {
    uint16_t* base = weights->get() + i * (a_elems + b_elems);
    pairs[i] = LoraPair{base, base + a_elems, kRank, 2.0f};
  }
  const int max_n = 64;
  auto x = DeviceBuffer<float>::FromHost(std::vector<float>(size_t{max_n} * kH, 0.01f));
  auto v = DeviceBuffer<float>::Allocate(size_t{max_n} * kRank);
  auto y = DeviceBuffer<float>::FromHost(std::vector<float>(size_t{max_n} * kH, 0.0f));
  CudaLoraOpsOptions opts;
  opts.max_tokens = max_n;
  opts.max_h_in = kH;
  opts.max_v_stride = kRank;
  auto ops = CudaLoraOps::Create(opts);
  if (!x.ok() || !v.ok() || !y.ok() || !ops.ok()) return 1;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);

  std::printf("SGMV shrink+expand, h=%d r=%d, us per operator (GB/s of adapter bytes)\n", kH,
              kRank);
  const char* workloads[] = {"Distinct", "Uniform", "Skewed", "Identical"};
  std::printf("%6s", "batch");
  for (const char* w : workloads) std::printf(" %22s", w);
  std::printf("\n");
  for (int n : {1, 2, 4, 8, 16, 32, 64}) {
    std::printf("%6d", n);
    for (const char* w : workloads) {
      std::mt19937 rng(1);
      const std::vector<int> slot = Slots(w, n, rng);
      // kRotations tables, each using a different window of the pool.
      std::vector<std::unique_ptr<DeviceLoraTable>> tables;
      int n_segs = 0, distinct = 0;
      for (int rot = 0; rot < kRotations; ++rot) {
        std::vector<LoraSegment> segs;
        for (int t = 0; t < n; ++t) {
          const LoraPair* p = &pairs[(rot * max_n + slot[t]) % kPool];
          if (!segs.empty() && segs.back().lora == p) {
            segs.back().end = t + 1;
          } else {
            segs.push_back({t, t + 1, p});
          }
        }
        n_segs = static_cast<int>(segs.size());
        distinct = n_segs;
        tables.push_back(std::make_unique<DeviceLoraTable>());
        if (!tables.back()->Upload(segs.data(), n_segs).ok()) return 1;
      }
      std::vector<float> us;
      for (int run = 0; run < kRuns; ++run) {
        cudaEventRecord(start);
        for (int c = 0; c < kCalls; ++c) {
          const LoraSegment* segs = tables[c % kRotations]->segs();
          (*ops)->SgmvShrink(x->get(), kH, segs, n_segs, v->get(), kRank);
          (*ops)->SgmvExpand(v->get(), kRank, segs, n_segs, kH, y->get());
        }
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, start, stop);
        us.push_back(1000.0f * ms / kCalls);
      }
      const absl::Status st = (*ops)->status();
      if (!st.ok()) {
        std::printf("\nerror: %s\n", st.ToString().c_str());
        return 1;
      }
      std::sort(us.begin(), us.end());
      const double med = us[kRuns / 2];
      const double gbps = distinct * (a_elems + b_elems) * 2.0 / (med * 1e3);
      std::printf(" %10.1f us (%5.0f GB/s)", med, gbps);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace loom::kernels::cuda

int main() { return loom::kernels::cuda::Run(); }
