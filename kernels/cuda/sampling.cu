// Temperature / top-k / top-p / min-p sampling on the device, one 256-thread block per
// row, no sort: every cut is a bisection over a 64-bit key that orders candidates by
// (value desc, id asc) — key = ordered_bits(value) << 32 | (0xFFFFFFFF - id) — with one
// block-wide reduction per step (64 steps per cut). Order of the steps (as in
// models/sampling/sampler.h): sanitize (NaN -> -inf, +inf -> FLT_MAX); temperature 0 ->
// argmax; top-k on logits; p = expf((logit - max) / T); top-p on (p, id); min-p; then the
// first candidate, walking in (p desc, id asc) order when top-k or top-p is on (id order
// otherwise), whose cumulative p exceeds u * total.
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/sampling_launch.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

__device__ __forceinline__ float Sanitize(float x) {
  if (isnan(x)) return -INFINITY;
  if (isinf(x) && x > 0) return FLT_MAX;
  return x;
}

__device__ __forceinline__ uint64_t Key(float v, int id) {
  uint32_t b = __float_as_uint(v);
  b ^= (b >> 31) ? 0xFFFFFFFFu : 0x80000000u;
  return (static_cast<uint64_t>(b) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

__device__ __forceinline__ int KeyId(uint64_t key) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

// Block-wide reductions; every thread gets the result. Fixed order (deterministic).
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op) {
  __shared__ T warp_vals[kThreads / kWarp];
  __shared__ T result;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T acc = warp_vals[0];
    for (int w = 1; w < kThreads / kWarp; ++w) acc = op(acc, warp_vals[w]);
    result = acc;
  }
  __syncthreads();
  const T out = result;
  __syncthreads();  // `result` may be rewritten by the next call
  return out;
}

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxU64 {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a > b ? a : b; }
};

// Largest key tau with pred(tau) true, for pred monotone (true up to some point, then
// false); returns `none` (and *found = false) if pred(0) is false.
template <typename Pred>
__device__ uint64_t LargestKey(Pred pred, bool* found) {
  if (!pred(0ull)) {
    *found = false;
    return 0;
  }
  *found = true;
  uint64_t lo = 0, hi = ~0ull;  // pred(lo) true
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2 + 1;
    if (pred(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(const float* logits, int vocab, const DeviceSampleParams* params,
                 int32_t* ids) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const DeviceSampleParams prm = params[blockIdx.x];
  // 1. argmax key (max logit, lowest id).
  uint64_t best = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const uint64_t k = Key(Sanitize(row[i]), i);
    best = k > best ? k : best;
  }
  best = BlockReduce(best, MaxU64());
  if (prm.temperature <= 0.0f) {
    if (threadIdx.x == 0) ids[blockIdx.x] = KeyId(best);
    return;
  }
  const float max_logit = Sanitize(row[KeyId(best)]);
  // 2. top-k: survivors have key >= k-th largest key.
  uint64_t k_cut = 0;
  const bool use_k = prm.top_k > 0 && prm.top_k < vocab;
  if (use_k) {
    bool found = false;
    k_cut = LargestKey(
        [&](uint64_t tau) {
          int c = 0;
          for (int i = threadIdx.x; i < vocab; i += kThreads) c += Key(Sanitize(row[i]), i) >= tau;
          return BlockReduce(c, Sum()) >= prm.top_k;
        },
        &found);
  }
  const float inv_t = 1.0f / prm.temperature;
  auto prob = [&](int i, uint64_t* pkey) {
    const float l = Sanitize(row[i]);
    if (use_k && Key(l, i) < k_cut) return -1.0f;  // not a candidate
    const float p = l == -INFINITY ? 0.0f : expf((l - max_logit) * inv_t);
    *pkey = Key(p, i);
    return p;
  };
  // Sum of p over candidates with pkey >= tau (tau = 0: all candidates).
  auto mass = [&](uint64_t tau, uint64_t floor_key, float p_floor) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      uint64_t pk = 0;
      const float p = prob(i, &pk);
      if (p >= 0.0f && pk >= tau && pk >= floor_key && p >= p_floor) s += p;
    }
    return BlockReduce(s, Sum());
  };
  const float total = mass(0, 0, 0.0f);
  // 3. top-p: keep pkey >= p_cut, the largest cut whose mass reaches top_p * total.
  uint64_t p_cut = 0;
  const bool use_p = prm.top_p < 1.0f;
  if (use_p) {
    bool found = false;
    const float need = prm.top_p * total;
    p_cut = LargestKey([&](uint64_t tau) { return mass(tau, 0, 0.0f) >= need; }, &found);
  }
  // 4. min-p relative to the most likely token (p = 1 at the max logit).
  const float p_floor = prm.min_p > 0.0f ? prm.min_p * 1.0f : 0.0f;
  const float kept = mass(0, p_cut, p_floor);
  const float target = static_cast<float>(prm.u * kept);
  int chosen = -1;
  if (use_k || use_p) {
    bool found = false;
    const uint64_t tau =
        LargestKey([&](uint64_t t) { return mass(t, p_cut, p_floor) > target; }, &found);
    if (found) chosen = KeyId(tau);
  } else {
    // Smallest id j whose prefix mass (ids <= j) exceeds target: bisection on j.
    int lo = 0, hi = vocab - 1;
    auto prefix = [&](int j) {
      float s = 0.0f;
      for (int i = threadIdx.x; i <= j; i += kThreads) {
        uint64_t pk = 0;
        const float p = prob(i, &pk);
        if (p >= p_floor) s += p;
      }
      return BlockReduce(s, Sum());
    };
    if (prefix(vocab - 1) > target) {
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (prefix(mid) > target) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      chosen = lo;
    }
  }
  if (chosen < 0) {
    // Rounding put target at or past the total: the last candidate in walk order.
    uint64_t last = ~0ull;
    int last_id = -1;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      uint64_t pk = 0;
      const float p = prob(i, &pk);
      if (p > 0.0f && pk >= p_cut && p >= p_floor) {
        const uint64_t order = (use_k || use_p) ? pk : ~static_cast<uint64_t>(i);
        if (order < last) {
          last = order;
          last_id = i;
        }
      }
    }
    // Min over threads of `order`, carrying the id: pack nothing, just reduce twice.
    const uint64_t m = ~BlockReduce(~last, MaxU64());
    int id = last == m ? last_id : -1;
    id = BlockReduce(id, [](int a, int b) { return a > b ? a : b; });
    chosen = id >= 0 ? id : KeyId(best);
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = chosen;
}

}  // namespace

cudaError_t LaunchSample(const float* logits, int n, int vocab,
                         const DeviceSampleParams* params, int32_t* ids, cudaStream_t stream) {
  SampleKernel<<<n, kThreads, 0, stream>>>(logits, vocab, params, ids);
  return cudaGetLastError();
}

}  // namespace loom::kernels::cuda
