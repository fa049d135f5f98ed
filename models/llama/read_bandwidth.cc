#include "models/llama/read_bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace loom {
namespace {

// Sum of the 64-bit lanes of [p, p + n) with eight independent AVX2 accumulators.
// REQUIRES: p 32-byte aligned, n % 256 == 0.
__attribute__((target("avx2"))) uint64_t StreamReadAvx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
          a6 = a0, a7 = a0;
  for (size_t i = 0; i < n; i += 256) {
    const __m256i* v = reinterpret_cast<const __m256i*>(p + i);
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + 0));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + 3));
    a4 = _mm256_add_epi64(a4, _mm256_load_si256(v + 4));
    a5 = _mm256_add_epi64(a5, _mm256_load_si256(v + 5));
    a6 = _mm256_add_epi64(a6, _mm256_load_si256(v + 6));
    a7 = _mm256_add_epi64(a7, _mm256_load_si256(v + 7));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)),
                        _mm256_add_epi64(_mm256_add_epi64(a4, a5), _mm256_add_epi64(a6, a7)));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a0);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t StreamReadScalar(const uint8_t* p, size_t n) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < n / 8; i += 4) {
    s0 += w[i];
    s1 += w[i + 1];
    s2 += w[i + 2];
    s3 += w[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

// Read bandwidth in bytes/s: best of `passes` passes of `threads` threads each streaming
// an equal share of a `bytes` buffer.
}  // namespace

absl::StatusOr<double> MeasureReadBandwidth(size_t bytes, int threads, int passes) {
  if (threads < 1) return absl::InvalidArgumentError("bandwidth probe: threads < 1");
  const size_t share = bytes / threads / 256 * 256;
  if (share == 0) return absl::InvalidArgumentError("bandwidth probe: buffer too small");
  const size_t total = share * threads;
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(
      static_cast<uint8_t*>(std::aligned_alloc(64, total)), &std::free);
  if (buf == nullptr) return absl::ResourceExhaustedError("bandwidth probe: out of memory");
  std::memset(buf.get(), 1, total);  // fault every page in before timing
  const bool avx2 = __builtin_cpu_supports("avx2");
  std::vector<uint64_t> sums(threads);
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    auto work = [&](int t) {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      const uint8_t* p = buf.get() + share * t;
      sums[t] = avx2 ? StreamReadAvx2(p, share) : StreamReadScalar(p, share);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
    while (ready.load() < threads - 1) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    work(0);
    for (std::thread& th : pool) th.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, total / s);
  }
  uint64_t sink = 0;
  for (uint64_t s : sums) sink += s;
  if (sink != total / 8 * 0x0101010101010101ull) {  // every byte was 1
    return absl::InternalError("bandwidth probe: read-back checksum mismatch");
  }
  return best;
}


}  // namespace loom
