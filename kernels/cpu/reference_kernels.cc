#include "kernels/cpu/reference_kernels.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kv_quant.h"

namespace loom::kernels::ref {

float DotQ8(DType t, const uint8_t* wrow, const BlockQ8Act* x, int nb, double* abs_scale) {
  double sum = 0.0, asum = 0.0;
  for (int b = 0; b < nb; ++b) {
    const int8_t* xq = x[b].qs;
    double term = 0.0, term_abs = -1.0;
    switch (t) {
      case DType::kQ8_0: {
        const BlockQ8_0& w = reinterpret_cast<const BlockQ8_0*>(wrow)[b];
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += w.qs[j] * xq[j];
        term = static_cast<double>(Fp16ToFp32(w.d)) * x[b].d * isum;
        break;
      }
      case DType::kQ4_0: {
        const BlockQ4_0& w = reinterpret_cast<const BlockQ4_0*>(wrow)[b];
        int isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += ((w.qs[j] & 0xF) - 8) * xq[j];
          isum += ((w.qs[j] >> 4) - 8) * xq[j + 16];
        }
        term = static_cast<double>(Fp16ToFp32(w.d)) * x[b].d * isum;
        break;
      }
      case DType::kQ4_1: {
        const BlockQ4_1& w = reinterpret_cast<const BlockQ4_1*>(wrow)[b];
        int isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += (w.qs[j] & 0xF) * xq[j];
          isum += (w.qs[j] >> 4) * xq[j + 16];
        }
        const double a = static_cast<double>(Fp16ToFp32(w.d)) * x[b].d * isum;
        const double m = static_cast<double>(Fp16ToFp32(w.m)) * x[b].s;
        term = a + m;
        term_abs = std::fabs(a) + std::fabs(m);  // both parts count towards the scale
        break;
      }
      default:
        return std::numeric_limits<float>::quiet_NaN();
    }
    sum += term;
    asum += term_abs >= 0.0 ? term_abs : std::fabs(term);
  }
  if (abs_scale != nullptr) *abs_scale = asum;
  return static_cast<float>(sum);
}

float DotFloat(DType t, const uint8_t* wrow, const float* x, int k, double* abs_scale) {
  double sum = 0.0, asum = 0.0;
  for (int i = 0; i < k; ++i) {
    float w;
    switch (t) {
      case DType::kF32: __builtin_memcpy(&w, wrow + 4 * i, 4); break;
      case DType::kF16: {
        uint16_t h;
        __builtin_memcpy(&h, wrow + 2 * i, 2);
        w = Fp16ToFp32(h);
        break;
      }
      case DType::kBF16: {
        uint16_t h;
        __builtin_memcpy(&h, wrow + 2 * i, 2);
        w = Bf16ToFp32(h);
        break;
      }
      default:
        return std::numeric_limits<float>::quiet_NaN();
    }
    const double p = static_cast<double>(w) * x[i];
    sum += p;
    asum += std::fabs(p);
  }
  if (abs_scale != nullptr) *abs_scale = asum;
  return static_cast<float>(sum);
}

void RmsNormRow(const float* x, const float* gamma, int dim, float eps, float* y) {
  double ss = 0.0;
  for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(ss / dim + eps);
  for (int i = 0; i < dim; ++i) y[i] = static_cast<float>(x[i] * scale * gamma[i]);
}

float SiluMul(float g, float u) {
  const double gd = g;
  return static_cast<float>(gd / (1.0 + std::exp(-gd)) * u);
}

void RopeCosSin(int32_t pos, int head_dim, float theta, float* cos_out, float* sin_out) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    const double angle = static_cast<double>(pos) * inv_freq;
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void RopeHead(float* x, const float* cos_v, const float* sin_v, int head_dim,
              bool adjacent_pairs) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const int a = adjacent_pairs ? 2 * i : i;
    const int b = adjacent_pairs ? 2 * i + 1 : i + half;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * cos_v[i] - x1 * sin_v[i];
    x[b] = x0 * sin_v[i] + x1 * cos_v[i];
  }
}

void AttentionHead(const KvLayout& l, const AttentionBatch& b, int t, int head,
                   int n_heads, const float* q_head, const uint8_t* k_pool,
                   const uint8_t* v_pool, double* scratch, float* row, float* out_head) {
  const int d = l.head_dim;
  const int kv_head = head / (n_heads / l.n_kv_heads);
  const int32_t seq = b.seq_of_token[t];
  const int32_t* pages = b.page_table + b.page_indptr[seq];
  const int32_t last = b.positions[t];
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  double mx = -std::numeric_limits<double>::infinity();
  for (int32_t p = 0; p <= last; ++p) {
    DequantizeKvRow(l.dtype, KvRow(l, k_pool, pages, p, kv_head), d, row);
    double s = 0.0;
    for (int i = 0; i < d; ++i) s += static_cast<double>(q_head[i]) * row[i];
    scratch[p] = s * scale;
    if (scratch[p] > mx) mx = scratch[p];
  }
  double denom = 0.0;
  for (int32_t p = 0; p <= last; ++p) {
    scratch[p] = std::exp(scratch[p] - mx);
    denom += scratch[p];
  }
  std::vector<double> acc(d, 0.0);
  for (int32_t p = 0; p <= last; ++p) {
    DequantizeKvRow(l.dtype, KvRow(l, v_pool, pages, p, kv_head), d, row);
    for (int i = 0; i < d; ++i) acc[i] += scratch[p] * row[i];
  }
  for (int i = 0; i < d; ++i) out_head[i] = static_cast<float>(acc[i] / denom);
}

}  // namespace loom::kernels::ref
