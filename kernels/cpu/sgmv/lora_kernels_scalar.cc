// Portable implementation of the canonical LoRA dots (lora_kernels.h), bitwise equal to
// the AVX2 kernels: the same accumulators, the same fmaf sequences, the same sum trees.
#include <cstring>

#include "kernels/cpu/sgmv/lora_kernels.h"

namespace loom::kernels::sgmv {
namespace {

inline float Bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float CanonicalDot(const float* x, const uint16_t* w, int k_len) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float xb[16], wb[16];
  for (int k = 0; k < k_len; k += 16) {
    const int n = k_len - k < 16 ? k_len - k : 16;
    for (int i = 0; i < 16; ++i) {
      xb[i] = i < n ? x[k + i] : 0.0f;
      wb[i] = i < n ? Bf16(w[k + i]) : 0.0f;
    }
    for (int i = 0; i < 8; ++i) {
      acc[i] = __builtin_fmaf(xb[2 * i], wb[2 * i], acc[i]);
      acc[i] = __builtin_fmaf(xb[2 * i + 1], wb[2 * i + 1], acc[i]);
    }
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

float CanonicalExpandDot(const float* v, const uint16_t* b, int rank) {
  float e = 0.0f, d = 0.0f;
  int j = 0;
  for (; j + 1 < rank; j += 2) {
    e = __builtin_fmaf(v[j], Bf16(b[j]), e);
    d = __builtin_fmaf(v[j + 1], Bf16(b[j + 1]), d);
  }
  if (j < rank) {
    e = __builtin_fmaf(v[j], Bf16(b[j]), e);
    d = __builtin_fmaf(0.0f, 0.0f, d);
  }
  return e + d;
}

void Shrink(const float* x, int64_t x_stride, int n_tokens, const uint16_t* a, int h_in,
            int r_begin, int r_end, float* v, int64_t v_stride, const void*, int64_t) {
  for (int t = 0; t < n_tokens; ++t) {
    for (int r = r_begin; r < r_end; ++r) {
      v[t * v_stride + r] = CanonicalDot(x + t * x_stride, a + static_cast<int64_t>(r) * h_in, h_in);
    }
  }
}

void Expand(const float* v, int64_t v_stride, int n_tokens, const uint16_t* b, int rank,
            float scale, int o_begin, int o_end, float* y, int64_t y_stride, const void*,
            int64_t) {
  for (int t = 0; t < n_tokens; ++t) {
    for (int o = o_begin; o < o_end; ++o) {
      float* out = y + t * y_stride + o;
      *out = __builtin_fmaf(
          scale, CanonicalExpandDot(v + t * v_stride, b + static_cast<int64_t>(o) * rank, rank),
          *out);
    }
  }
}

constexpr LoraKernelTable kTable = {&Shrink, &Expand};

}  // namespace

const LoraKernelTable* ScalarLoraKernels() { return &kTable; }

bool Avx2LoraSupported() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace loom::kernels::sgmv
