#include "kernels/quant/weight_packing.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace loom::kernels::quant {

float AbsMax(const float* x, int count) {
  float m = 0.0f;
  for (int i = 0; i < count; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

float QuantizeSymmetricRow(const float* x, int count, float absmax, int bits, int8_t* q) {
  const int qmax = QMax(bits);
  const float fq = static_cast<float>(qmax);
  const float inv = absmax > 0.0f ? fq / absmax : 0.0f;
  for (int i = 0; i < count; ++i) {
    const float v = std::nearbyint(x[i] * inv);
    q[i] = static_cast<int8_t>(std::clamp(static_cast<int>(v), -qmax, qmax));
  }
  return absmax / fq;
}

void PackNormalRow(const int8_t* q, const QuantSpec& spec, uint8_t* out) {
  const int kp = spec.k_normal_padded();
  if (spec.w_bits == 8) {
    std::memcpy(out, q, static_cast<size_t>(kp));
    return;
  }
  const int half = spec.group / 2;
  for (int g = 0; g < spec.n_groups(); ++g) {
    const int8_t* src = q + static_cast<size_t>(g) * spec.group;
    uint8_t* dst = out + static_cast<size_t>(g) * half;
    for (int i = 0; i < half; ++i) {
      const uint8_t lo = static_cast<uint8_t>(src[i] + 8) & 0xF;
      const uint8_t hi = static_cast<uint8_t>(src[i + half] + 8) & 0xF;
      dst[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void UnpackNormalRow(const uint8_t* row, const QuantSpec& spec, int8_t* q) {
  const int kp = spec.k_normal_padded();
  if (spec.w_bits == 8) {
    std::memcpy(q, row, static_cast<size_t>(kp));
    return;
  }
  const int half = spec.group / 2;
  for (int g = 0; g < spec.n_groups(); ++g) {
    const uint8_t* src = row + static_cast<size_t>(g) * half;
    int8_t* dst = q + static_cast<size_t>(g) * spec.group;
    for (int i = 0; i < half; ++i) {
      dst[i] = static_cast<int8_t>(Int4FromNibble(src[i]));
      dst[i + half] = static_cast<int8_t>(Int4FromNibble(src[i] >> 4));
    }
  }
}

AtomWeightView AtomWeight::view() const {
  AtomWeightView v;
  v.spec = spec;
  v.rows = rows;
  v.q = q.data();
  v.scales = scales.data();
  v.q_outlier = spec.n_outliers > 0 ? q_outlier.data() : nullptr;
  v.outlier_scales = spec.n_outliers > 0 ? outlier_scales.data() : nullptr;
  return v;
}

absl::StatusOr<AtomWeight> QuantizeWeightRTN(const float* w, int64_t rows,
                                             const QuantSpec& spec, float clip) {
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  if (rows < 0) return absl::InvalidArgumentError(absl::StrCat("rows = ", rows, " < 0"));
  if (!(clip > 0.0f && clip <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("clip = ", clip, " not in (0, 1]"));
  }
  AtomWeight out;
  out.spec = spec;
  out.rows = rows;
  const int kn = spec.k_normal(), kp = spec.k_normal_padded(), ng = spec.n_groups();
  const int no = spec.n_outliers;
  out.q.resize(static_cast<size_t>(rows) * spec.weight_row_bytes());
  out.scales.resize(static_cast<size_t>(rows) * ng);
  out.q_outlier.resize(static_cast<size_t>(rows) * no);
  out.outlier_scales.resize(no > 0 ? static_cast<size_t>(rows) : 0);
  std::vector<int8_t> qrow(kp);
  for (int64_t r = 0; r < rows; ++r) {
    const float* wr = w + r * spec.k;
    std::fill(qrow.begin(), qrow.end(), 0);
    for (int g = 0; g < ng; ++g) {
      const int j0 = g * spec.group, cnt = std::min(spec.group, kn - j0);
      out.scales[r * ng + g] = QuantizeSymmetricRow(wr + j0, cnt, clip * AbsMax(wr + j0, cnt),
                                                    spec.w_bits, qrow.data() + j0);
    }
    PackNormalRow(qrow.data(), spec, out.q.data() + r * spec.weight_row_bytes());
    if (no > 0) {
      out.outlier_scales[r] = QuantizeSymmetricRow(wr + kn, no, clip * AbsMax(wr + kn, no), 8,
                                                   out.q_outlier.data() + r * no);
    }
  }
  return out;
}

std::vector<float> DequantizeWeight(const AtomWeightView& w) {
  const QuantSpec& s = w.spec;
  const int kn = s.k_normal(), ng = s.n_groups(), no = s.n_outliers;
  std::vector<float> out(static_cast<size_t>(w.rows) * s.k);
  std::vector<int8_t> q(s.k_normal_padded());
  for (int64_t r = 0; r < w.rows; ++r) {
    UnpackNormalRow(w.q + r * s.weight_row_bytes(), s, q.data());
    float* o = out.data() + r * s.k;
    for (int j = 0; j < kn; ++j) o[j] = q[j] * w.scales[r * ng + j / s.group];
    for (int j = 0; j < no; ++j) o[kn + j] = w.q_outlier[r * no + j] * w.outlier_scales[r];
  }
  return out;
}

std::vector<float> DequantizeActivations(const AtomActivations& x) {
  const QuantSpec& s = x.spec;
  const int kn = s.k_normal(), kp = s.k_normal_padded(), ng = s.n_groups(), no = s.n_outliers;
  std::vector<float> out(static_cast<size_t>(x.n) * s.k);
  for (int t = 0; t < x.n; ++t) {
    float* o = out.data() + static_cast<size_t>(t) * s.k;
    for (int j = 0; j < kn; ++j) {
      o[j] = x.q[static_cast<size_t>(t) * kp + j] * x.scales[static_cast<size_t>(t) * ng + j / s.group];
    }
    for (int j = 0; j < no; ++j) {
      o[kn + j] = x.q_outlier[static_cast<size_t>(t) * no + j] * x.outlier_scales[t];
    }
  }
  return out;
}

void PermuteColumns(const float* in, int64_t rows, int k, const int32_t* perm, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) out[r * k + j] = in[r * k + perm[j]];
  }
}

}  // namespace loom::kernels::quant
