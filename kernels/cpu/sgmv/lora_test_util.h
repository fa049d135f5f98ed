// Random LoRA adapters, batches and segmentations for the SGMV tests and benchmark.
#ifndef LOOM_KERNELS_CPU_SGMV_LORA_TEST_UTIL_H_
#define LOOM_KERNELS_CPU_SGMV_LORA_TEST_UTIL_H_

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/lora_ops.h"

namespace loom::kernels::testing {

// One adapter's BF16 weights; `pair` points into a and b (stable: keep adapters in a deque).
struct TestAdapter {
  std::vector<uint16_t> a;  // [rank, h_in]
  std::vector<uint16_t> b;  // [h_out, rank]
  LoraPair pair;
};

inline std::vector<uint16_t> RandomBf16(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<uint16_t> out(n);
  for (uint16_t& h : out) h = Fp32ToBf16(u(rng));
  return out;
}

// Adds an adapter with uniform random weights (A in +-1/sqrt(h_in)-ish, B in +-1) to `pool`.
inline const LoraPair* AddRandomAdapter(std::deque<TestAdapter>* pool, int h_in, int h_out,
                                        int rank, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  TestAdapter& ad = pool->emplace_back();
  ad.a = RandomBf16(static_cast<size_t>(rank) * h_in, rng, 1.0f);
  ad.b = RandomBf16(static_cast<size_t>(h_out) * rank, rng, 1.0f);
  ad.pair = LoraPair{ad.a.data(), ad.b.data(), rank, scale};
  return &ad.pair;
}

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

// Splits `n_tokens` into segments of the given lengths (which must sum to n_tokens) using
// `loras[i]` for segment i.
inline std::vector<LoraSegment> MakeSegments(const std::vector<int>& lengths,
                                             const std::vector<const LoraPair*>& loras) {
  std::vector<LoraSegment> segs;
  int begin = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    segs.push_back(LoraSegment{begin, begin + lengths[i], loras[i]});
    begin += lengths[i];
  }
  return segs;
}

}  // namespace loom::kernels::testing

#endif  // LOOM_KERNELS_CPU_SGMV_LORA_TEST_UTIL_H_
