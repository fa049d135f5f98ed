// Random weights and activations for the CPU kernel tests and benchmarks.
#ifndef LOOM_KERNELS_CPU_TEST_UTIL_H_
#define LOOM_KERNELS_CPU_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace loom::kernels::testing {

// Owns the bytes behind a WeightMatrix.
struct TestMatrix {
  std::vector<uint8_t> storage;
  WeightMatrix w;
};

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// A rows x cols matrix of type t with random contents: float types hold uniform values in
// [-1, 1); quantized blocks hold random integers with scales ~ 1/64 (and mins ~ +-1/8).
inline TestMatrix RandomMatrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  TestMatrix m;
  const size_t rb = *DTypeRowBytes(t, cols);
  m.storage.resize(rb * rows);
  m.w = WeightMatrix{t, rows, cols, m.storage.data(), rb};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.5f / 64, 1.5f / 64);
  std::uniform_int_distribution<int> ubyte(0, 255), uq8(-127, 127);
  const int64_t n = rows * cols;
  uint8_t* p = m.storage.data();
  switch (t) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) { const float f = uf(rng); std::memcpy(p + 4 * i, &f, 4); }
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToFp16(uf(rng));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToBf16(uf(rng));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case DType::kQ8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(p);
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = Fp32ToFp16(ud(rng));
        for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(uq8(rng));
      }
      break;
    }
    case DType::kQ4_0: {
      auto* b = reinterpret_cast<BlockQ4_0*>(p);
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = Fp32ToFp16(ud(rng) * 8);
        for (int j = 0; j < 16; ++j) b[i].qs[j] = static_cast<uint8_t>(ubyte(rng));
      }
      break;
    }
    case DType::kQ4_1: {
      auto* b = reinterpret_cast<BlockQ4_1*>(p);
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = Fp32ToFp16(ud(rng) * 8);
        b[i].m = Fp32ToFp16(uf(rng) / 8);
        for (int j = 0; j < 16; ++j) b[i].qs[j] = static_cast<uint8_t>(ubyte(rng));
      }
      break;
    }
  }
  return m;
}

inline constexpr DType kAllDTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,
                                       DType::kQ8_0, DType::kQ4_0, DType::kQ4_1};

}  // namespace loom::kernels::testing

#endif  // LOOM_KERNELS_CPU_TEST_UTIL_H_
