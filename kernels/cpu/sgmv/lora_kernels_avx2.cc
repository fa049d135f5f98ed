// AVX2 + FMA implementation of the canonical LoRA dot (lora_kernels.h). Compiled with
// -mavx2 -mfma (see BUILD) and only called after Avx2LoraSupported(). Everything except
// Avx2LoraKernels() lives in an anonymous namespace and only intrinsics/builtins are used,
// so no inline function compiled for AVX2 can be picked by the linker for another TU.
//
// Tiles of NT tokens x NR weight rows keep NT * NR accumulators in registers; each
// (token, row) accumulator runs exactly the canonical sequence whatever NT and NR are, so
// the tiling (which depends on segment lengths and on the work split) never changes a bit.
#include "kernels/cpu/sgmv/lora_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>

#define LOOM_INLINE inline __attribute__((always_inline))

namespace loom::kernels::sgmv {
namespace {

// 16 floats -> even elements (0, 2, .., 14) and odd elements (1, 3, .., 15), in order.
LOOM_INLINE void LoadX16(const float* p, __m256* e, __m256* o) {
  const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  // shuffle_ps gives [0 2 8 10 | 4 6 12 14]; permuting 64-bit pairs (0 2 1 3) sorts it.
  *e = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  *o = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// 16 BF16 -> FP32 even elements (low halves of the 32-bit words) and odd (high halves).
LOOM_INLINE void LoadW16(const uint16_t* p, __m256* e, __m256* o) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  *e = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  *o = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Lane j of the result = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) of the j-th input.
LOOM_INLINE __m128 Reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Spreads prefetches of the next work item's weights over this item's K chunks, so that
// DRAM reads overlap the arithmetic (adapters are cold; the hardware prefetcher restarts
// at every 4 KiB page and every new adapter).
struct Prefetcher {
  const char* p = nullptr;
  const char* end = nullptr;
  int per_step = 0;
  LOOM_INLINE void Step() {
    for (int i = 0; i < per_step && p < end; ++i, p += 64) _mm_prefetch(p, _MM_HINT_T0);
  }
};

template <int NT, int NR>
LOOM_INLINE void Step(const float* x, int64_t xs, const uint16_t* w, int64_t ws,
                      __m256 (&acc)[NT][NR]) {
  __m256 xe[NT], xo[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) LoadX16(x + t * xs, &xe[t], &xo[t]);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    __m256 we, wo;
    LoadW16(w + r * ws, &we, &wo);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      acc[t][r] = _mm256_fmadd_ps(xe[t], we, acc[t][r]);
      acc[t][r] = _mm256_fmadd_ps(xo[t], wo, acc[t][r]);
    }
  }
}

// out[t][r] = canonical dot(x + t * xs, w + r * ws) over k_len elements.
template <int NT, int NR>
LOOM_INLINE void Tile(const float* x, int64_t xs, const uint16_t* w, int64_t ws, int k_len,
                      Prefetcher& pf, float (&out)[NT][NR]) {
  __m256 acc[NT][NR];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  int k = 0;
  for (; k + 16 <= k_len; k += 16) {
    pf.Step();
    Step<NT, NR>(x + k, xs, w + k, ws, acc);
  }
  if (k < k_len) {  // zero-padded last chunk
    pf.Step();
    const int n = k_len - k;
    alignas(32) float xp[NT][16];
    alignas(32) uint16_t wp[NR][16];
    for (int t = 0; t < NT; ++t) {
      std::memset(xp[t], 0, sizeof(xp[t]));
      std::memcpy(xp[t], x + t * xs + k, n * sizeof(float));
    }
    for (int r = 0; r < NR; ++r) {
      std::memset(wp[r], 0, sizeof(wp[r]));
      std::memcpy(wp[r], w + r * ws + k, n * sizeof(uint16_t));
    }
    Step<NT, NR>(&xp[0][0], 16, &wp[0][0], 16, acc);
  }
  const __m256 z = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < NR; r += 4) {
      alignas(16) float s[4];
      _mm_store_ps(s, Reduce4(acc[t][r], r + 1 < NR ? acc[t][r + 1] : z,
                              r + 2 < NR ? acc[t][r + 2] : z, r + 3 < NR ? acc[t][r + 3] : z));
      for (int j = 0; j < 4 && r + j < NR; ++j) out[t][r + j] = s[j];
    }
  }
}

// Runs Tile over tokens [0, n_tokens) x rows [r_begin, r_end) and hands each dot to
// store(t, r, dot). Two tokens at a time share each converted W chunk; a lone token takes
// eight rows at a time.
template <class Store>
LOOM_INLINE void Block(const float* x, int64_t xs, int n_tokens, const uint16_t* w, int64_t ws,
                       int k_len, int r_begin, int r_end, const void* pf_next, int64_t pf_bytes,
                       Store store) {
  // Spread the next item's lines over the K chunks of the first token (pair).
  Prefetcher pf;
  if (pf_next != nullptr && pf_bytes > 0) {
    const int64_t lines = (pf_bytes + 63) / 64;
    const int64_t chunks = static_cast<int64_t>((k_len + 15) / 16) *
                           ((r_end - r_begin + (n_tokens >= 2 ? 3 : 7)) / (n_tokens >= 2 ? 4 : 8));
    pf.p = static_cast<const char*>(pf_next);
    pf.end = pf.p + pf_bytes;
    pf.per_step = static_cast<int>((lines + chunks - 1) / (chunks > 0 ? chunks : 1));
  }
  int t = 0;
  for (; t + 2 <= n_tokens; t += 2) {
    const float* xt = x + t * xs;
    int r = r_begin;
    for (; r + 4 <= r_end; r += 4) {
      float o[2][4];
      Tile<2, 4>(xt, xs, w + r * ws, ws, k_len, pf, o);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) store(t + i, r + j, o[i][j]);
    }
    for (; r < r_end; ++r) {
      float o[2][1];
      Tile<2, 1>(xt, xs, w + r * ws, ws, k_len, pf, o);
      store(t, r, o[0][0]);
      store(t + 1, r, o[1][0]);
    }
  }
  for (; t < n_tokens; ++t) {
    const float* xt = x + t * xs;
    int r = r_begin;
    for (; r + 8 <= r_end; r += 8) {
      float o[1][8];
      Tile<1, 8>(xt, xs, w + r * ws, ws, k_len, pf, o);
      for (int j = 0; j < 8; ++j) store(t, r + j, o[0][j]);
    }
    for (; r + 4 <= r_end; r += 4) {
      float o[1][4];
      Tile<1, 4>(xt, xs, w + r * ws, ws, k_len, pf, o);
      for (int j = 0; j < 4; ++j) store(t, r + j, o[0][j]);
    }
    for (; r < r_end; ++r) {
      float o[1][1];
      Tile<1, 1>(xt, xs, w + r * ws, ws, k_len, pf, o);
      store(t, r, o[0][0]);
    }
  }
}

void Shrink(const float* x, int64_t x_stride, int n_tokens, const uint16_t* a, int h_in,
            int r_begin, int r_end, float* v, int64_t v_stride, const void* pf_next,
            int64_t pf_bytes) {
  Block(x, x_stride, n_tokens, a, h_in, h_in, r_begin, r_end, pf_next, pf_bytes,
        [v, v_stride](int t, int r, float d) { v[t * v_stride + r] = d; });
}

void Expand(const float* v, int64_t v_stride, int n_tokens, const uint16_t* b, int rank,
            float scale, int o_begin, int o_end, float* y, int64_t y_stride, const void* pf_next,
            int64_t pf_bytes) {
  Block(v, v_stride, n_tokens, b, rank, rank, o_begin, o_end, pf_next, pf_bytes,
        [y, y_stride, scale](int t, int o, float d) {
          float* out = y + t * y_stride + o;
          *out = __builtin_fmaf(scale, d, *out);
        });
}

constexpr LoraKernelTable kTable = {&Shrink, &Expand};

}  // namespace

const LoraKernelTable* Avx2LoraKernels() { return &kTable; }

}  // namespace loom::kernels::sgmv

#else  // not x86

namespace loom::kernels::sgmv {
const LoraKernelTable* Avx2LoraKernels() { return ScalarLoraKernels(); }
}  // namespace loom::kernels::sgmv

#endif
