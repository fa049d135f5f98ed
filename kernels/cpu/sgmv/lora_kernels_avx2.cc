// AVX2 + FMA implementation of the canonical LoRA dot (lora_kernels.h). Compiled with
// -mavx2 -mfma (see BUILD) and only called after Avx2LoraSupported(). Everything except
// Avx2LoraKernels() lives in an anonymous namespace and only intrinsics/builtins are used,
// so no inline function compiled for AVX2 can be picked by the linker for another TU.
//
// Shrink: tiles of NT tokens x NR rows of A keep NT * NR accumulators in registers. Expand:
// 8 outputs at a time, B's block transposed once and reused for every token. Each output
// runs exactly its canonical sequence whatever the tiling, so the tiling (which depends on
// segment lengths and on the work split) never changes a bit.
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

// ---- Expand: vectorised over 8 outputs ----

constexpr int kMaxVecRank = 256;  // larger ranks take the scalar form of the same sequence

LOOM_INLINE float Bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float ExpandDotScalar(const float* v, const uint16_t* b, int rank) {
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

// Transposes 8 rows of 8 32-bit words: t[i] = word i of rows 0..7.
LOOM_INLINE void Transpose8x8(const __m256i (&r)[8], __m256i (&t)[8]) {
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  t[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
  t[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
  t[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
  t[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
  t[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
  t[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
  t[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
  t[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

// t[i] = 32-bit word i (BF16 columns j + 2i, j + 2i + 1) of rows 0..7 of b (row stride
// rank); half: only 8 columns are left (words 4..7 read as 0).
LOOM_INLINE void LoadTransposed(const uint16_t* b, int rank, int j, bool half, __m256i (&t)[8]) {
  __m256i r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const uint16_t* p = b + static_cast<int64_t>(i) * rank + j;
    r[i] = half ? _mm256_set_m128i(_mm_setzero_si128(),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
                : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  Transpose8x8(r, t);
}

// cols[j][r] = B[r, j] as FP32 for j < rank, r < 8 (rows >= n_rows read as 0).
// b: the first of the rows, row stride = rank. REQUIRES: rank <= kMaxVecRank.
LOOM_INLINE void BuildCols(const uint16_t* b, int rank, int n_rows, float (*cols)[8]) {
  if (n_rows == 8 && rank % 8 == 0) {
    const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int j = 0; j < rank; j += 16) {
      const bool half = j + 16 > rank;  // 8 columns left
      __m256i t[8];
      LoadTransposed(b, rank, j, half, t);
      const int words = half ? 4 : 8;
      for (int i = 0; i < words; ++i) {
        _mm256_store_ps(cols[j + 2 * i], _mm256_castsi256_ps(_mm256_slli_epi32(t[i], 16)));
        _mm256_store_ps(cols[j + 2 * i + 1], _mm256_castsi256_ps(_mm256_and_si256(t[i], hi_mask)));
      }
    }
    return;
  }
  for (int j = 0; j < rank; ++j) {
    for (int r = 0; r < 8; ++r) cols[j][r] = r < n_rows ? Bf16(b[static_cast<int64_t>(r) * rank + j]) : 0.0f;
  }
}

// sum[t] (8 outputs) = dot_expand(v + t * vs, the 8 rows in cols).
template <int NT>
LOOM_INLINE void ExpandTile(const float* v, int64_t vs, const float (*cols)[8], int rank,
                            __m256 (&sum)[NT]) {
  __m256 e[NT], d[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) e[t] = d[t] = _mm256_setzero_ps();
  int j = 0;
  for (; j + 1 < rank; j += 2) {
    const __m256 ce = _mm256_load_ps(cols[j]), cd = _mm256_load_ps(cols[j + 1]);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      e[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(v + t * vs + j), ce, e[t]);
      d[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(v + t * vs + j + 1), cd, d[t]);
    }
  }
  if (j < rank) {
    const __m256 ce = _mm256_load_ps(cols[j]), z = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      e[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(v + t * vs + j), ce, e[t]);
      d[t] = _mm256_fmadd_ps(z, z, d[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) sum[t] = _mm256_add_ps(e[t], d[t]);
}

// ExpandTile without the column buffer, for items of one or two tokens (the transposed
// words stay in registers; a store + reload of the columns would stall on store
// forwarding). The same fmaf sequence as ExpandTile. REQUIRES: rank % 8 == 0, 8 rows.
template <int NT>
LOOM_INLINE void ExpandTileDirect(const float* v, int64_t vs, const uint16_t* b, int rank,
                                  __m256 (&sum)[NT]) {
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 e[NT], d[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) e[t] = d[t] = _mm256_setzero_ps();
  for (int j = 0; j < rank; j += 16) {
    const bool half = j + 16 > rank;
    __m256i w[8];
    LoadTransposed(b, rank, j, half, w);
    const int words = half ? 4 : 8;
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      if (i >= words) break;
      const __m256 ce = _mm256_castsi256_ps(_mm256_slli_epi32(w[i], 16));
      const __m256 cd = _mm256_castsi256_ps(_mm256_and_si256(w[i], hi_mask));
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        e[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(v + t * vs + j + 2 * i), ce, e[t]);
        d[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(v + t * vs + j + 2 * i + 1), cd, d[t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) sum[t] = _mm256_add_ps(e[t], d[t]);
}

// y[0..n) = fmaf(scale, sum[0..n), y[0..n)), n <= 8.
LOOM_INLINE void AccumulateY(float* y, int n, float scale, __m256 sum) {
  if (n == 8) {
    _mm256_storeu_ps(y, _mm256_fmadd_ps(_mm256_set1_ps(scale), sum, _mm256_loadu_ps(y)));
    return;
  }
  alignas(32) float s[8];
  _mm256_store_ps(s, sum);
  for (int i = 0; i < n; ++i) y[i] = __builtin_fmaf(scale, s[i], y[i]);
}

template <int NT>
LOOM_INLINE void ExpandTokens(const float* v, int64_t vs, const float (*cols)[8], int rank,
                              float scale, float* y, int64_t ys, int n_rows) {
  __m256 sum[NT];
  ExpandTile<NT>(v, vs, cols, rank, sum);
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) AccumulateY(y + t * ys, n_rows, scale, sum[t]);
}

void Expand(const float* v, int64_t v_stride, int n_tokens, const uint16_t* b, int rank,
            float scale, int o_begin, int o_end, float* y, int64_t y_stride, const void* pf_next,
            int64_t pf_bytes) {
  if (rank > kMaxVecRank) {
    for (int t = 0; t < n_tokens; ++t) {
      for (int o = o_begin; o < o_end; ++o) {
        float* out = y + t * y_stride + o;
        *out = __builtin_fmaf(
            scale, ExpandDotScalar(v + t * v_stride, b + static_cast<int64_t>(o) * rank, rank),
            *out);
      }
    }
    return;
  }
  Prefetcher pf;
  const int groups = (o_end - o_begin + 7) / 8;
  if (pf_next != nullptr && pf_bytes > 0 && groups > 0) {
    pf.p = static_cast<const char*>(pf_next);
    pf.end = pf.p + pf_bytes;
    pf.per_step = static_cast<int>(((pf_bytes + 63) / 64 + groups - 1) / groups);
  }
  const bool direct = n_tokens <= 2 && rank % 8 == 0;
  // Columns of the next group are built before the current group is computed (two
  // buffers), so the reloads never wait on the stores that wrote them.
  alignas(32) float cols[2][kMaxVecRank][8];
  if (!direct && o_begin < o_end) {
    BuildCols(b + static_cast<int64_t>(o_begin) * rank, rank,
              o_end - o_begin < 8 ? o_end - o_begin : 8, cols[0]);
  }
  for (int o = o_begin, g = 0; o < o_end; o += 8, g ^= 1) {
    pf.Step();
    const int n_rows = o_end - o < 8 ? o_end - o : 8;
    const uint16_t* bo = b + static_cast<int64_t>(o) * rank;
    if (direct && n_rows == 8) {
      if (n_tokens == 2) {
        __m256 sum[2];
        ExpandTileDirect<2>(v, v_stride, bo, rank, sum);
        AccumulateY(y + o, 8, scale, sum[0]);
        AccumulateY(y + y_stride + o, 8, scale, sum[1]);
      } else {
        __m256 sum[1];
        ExpandTileDirect<1>(v, v_stride, bo, rank, sum);
        AccumulateY(y + o, 8, scale, sum[0]);
      }
      continue;
    }
    if (direct) BuildCols(bo, rank, n_rows, cols[g]);  // last partial group
    if (!direct && o + 8 < o_end) {
      BuildCols(bo + 8 * rank, rank, o_end - o - 8 < 8 ? o_end - o - 8 : 8, cols[g ^ 1]);
    }
    const float(*c)[8] = cols[g];
    int t = 0;
    for (; t + 4 <= n_tokens; t += 4) {
      ExpandTokens<4>(v + t * v_stride, v_stride, c, rank, scale, y + t * y_stride + o,
                      y_stride, n_rows);
    }
    if (t + 2 <= n_tokens) {
      ExpandTokens<2>(v + t * v_stride, v_stride, c, rank, scale, y + t * y_stride + o,
                      y_stride, n_rows);
      t += 2;
    }
    if (t < n_tokens) {
      ExpandTokens<1>(v + t * v_stride, v_stride, c, rank, scale, y + t * y_stride + o,
                      y_stride, n_rows);
    }
  }
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
