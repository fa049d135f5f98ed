#include "kernels/quant/reference_atom_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/reference_kernels.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::quant {

void IntegerDots(const AtomWeightView& w, const AtomActivations& x, int t, int64_t r,
                 int32_t* group_dots, int32_t* outlier_dot) {
  const QuantSpec& s = w.spec;
  const int kp = s.k_normal_padded(), no = s.n_outliers;
  std::vector<int8_t> wq(kp);
  UnpackNormalRow(w.q + r * s.weight_row_bytes(), s, wq.data());
  const int8_t* xq = x.q.data() + static_cast<size_t>(t) * kp;
  for (int g = 0; g < s.n_groups(); ++g) {
    int32_t d = 0;
    for (int j = g * s.group; j < (g + 1) * s.group; ++j) d += int32_t{wq[j]} * xq[j];
    group_dots[g] = d;
  }
  int32_t d = 0;
  for (int j = 0; j < no; ++j) {
    d += int32_t{w.q_outlier[r * no + j]} * x.q_outlier[static_cast<size_t>(t) * no + j];
  }
  *outlier_dot = d;
}

float CombineDots(const AtomWeightView& w, const AtomActivations& x, int t, int64_t r,
                  const int32_t* group_dots, int32_t outlier_dot) {
  const QuantSpec& s = w.spec;
  const int ng = s.n_groups();
  float acc = 0.0f;
  for (int g = 0; g < ng; ++g) {
    const float scale = x.scales[static_cast<size_t>(t) * ng + g] * w.scales[r * ng + g];
    acc = std::fmaf(static_cast<float>(group_dots[g]), scale, acc);
  }
  if (s.n_outliers > 0) {
    const float scale = x.outlier_scales[t] * w.outlier_scales[r];
    acc = std::fmaf(static_cast<float>(outlier_dot), scale, acc);
  }
  return acc;
}

void QuantizeActivationRow(const float* xp, const QuantSpec& spec, int8_t* q, float* scales,
                           int8_t* q_outlier, float* outlier_scale) {
  const int kn = spec.k_normal();
  for (int j = kn; j < spec.k_normal_padded(); ++j) q[j] = 0;
  for (int g = 0; g < spec.n_groups(); ++g) {
    const int j0 = g * spec.group;
    const int cnt = std::min(spec.group, kn - j0);
    scales[g] = QuantizeSymmetricRow(xp + j0, cnt, AbsMax(xp + j0, cnt), spec.a_bits, q + j0);
  }
  if (spec.n_outliers > 0) {
    *outlier_scale = QuantizeSymmetricRow(xp + kn, spec.n_outliers,
                                          AbsMax(xp + kn, spec.n_outliers), 8, q_outlier);
  }
}

// The ReferenceBackend's own row kernels, so the fused ops match it bitwise by
// construction.
void ReferenceRmsNormRow(const float* x, const float* gamma, int dim, float eps, float* h) {
  ref::RmsNormRow(x, gamma, dim, eps, h);
}

float ReferenceSiluMul(float g, float u) { return ref::SiluMul(g, u); }

namespace {

class ReferenceAtomKernels final : public AtomKernels {
 public:
  std::string_view name() const override { return "atom-reference"; }

  void Quantize(const float* x, int n, const int32_t* perm, const QuantSpec& spec,
                AtomActivations* out, float* permuted) override {
    out->Resize(spec, n);
    std::vector<float> xp(spec.k);
    for (int t = 0; t < n; ++t) {
      const float* src = x + static_cast<size_t>(t) * spec.k;
      for (int j = 0; j < spec.k; ++j) xp[j] = perm != nullptr ? src[perm[j]] : src[j];
      if (permuted != nullptr) {
        std::copy(xp.begin(), xp.end(), permuted + static_cast<size_t>(t) * spec.k);
      }
      QuantizeRow(xp.data(), t, out);
    }
  }

  void RmsNormQuantize(const float* x, const float* gamma, int n, float eps,
                       const int32_t* perm, const QuantSpec& spec, AtomActivations* out,
                       float* normed) override {
    std::vector<float> h(static_cast<size_t>(n) * spec.k);
    for (int t = 0; t < n; ++t) {
      const size_t o = static_cast<size_t>(t) * spec.k;
      ReferenceRmsNormRow(x + o, gamma, spec.k, eps, h.data() + o);
    }
    Quantize(h.data(), n, perm, spec, out, normed);
  }

  void SiluMulQuantize(const float* gate, const float* up, int n, const QuantSpec& spec,
                       AtomActivations* out, float* h) override {
    std::vector<float> hv(static_cast<size_t>(n) * spec.k);
    for (size_t i = 0; i < hv.size(); ++i) hv[i] = ReferenceSiluMul(gate[i], up[i]);
    Quantize(hv.data(), n, nullptr, spec, out, h);
  }

  void HadamardQuantize(const float* x, int n, const HadamardTransform& t, const int32_t* perm,
                        const QuantSpec& spec, AtomActivations* out, float* rotated) override {
    out->Resize(spec, n);
    std::vector<float> r(spec.k);
    for (int row = 0; row < n; ++row) {
      const float* src = x + static_cast<size_t>(row) * spec.k;
      for (int j = 0; j < spec.k; ++j) r[j] = perm != nullptr ? src[perm[j]] : src[j];
      t.Apply(r.data(), 1);  // the first t.n() channels
      if (rotated != nullptr) std::copy(r.begin(), r.end(), rotated + static_cast<size_t>(row) * spec.k);
      QuantizeRow(r.data(), row, out);
    }
  }

  void SiluMulHadamardQuantize(const float* gate, const float* up, int n,
                               const HadamardTransform& t, const int32_t* perm,
                               const QuantSpec& spec, AtomActivations* out,
                               float* rotated) override {
    std::vector<float> hv(static_cast<size_t>(n) * spec.k);
    for (size_t i = 0; i < hv.size(); ++i) hv[i] = ReferenceSiluMul(gate[i], up[i]);
    HadamardQuantize(hv.data(), n, t, perm, spec, out, rotated);
  }

  void HadamardRows(const HadamardTransform& t, float* x, int n, bool transpose) override {
    t.Apply(x, n, transpose);
  }

  void MatMul(const AtomWeightView& w, const AtomActivations& x, float* y) override {
    if (x.spec != w.spec) {
      const size_t count = static_cast<size_t>(std::max(x.n, 0)) * std::max<int64_t>(w.rows, 0);
      std::fill(y, y + count, std::numeric_limits<float>::quiet_NaN());
      return;
    }
    std::vector<int32_t> d(w.spec.n_groups());
    int32_t dout = 0;
    for (int t = 0; t < x.n; ++t) {
      for (int64_t r = 0; r < w.rows; ++r) {
        IntegerDots(w, x, t, r, d.data(), &dout);
        y[t * w.rows + r] = CombineDots(w, x, t, r, d.data(), dout);
      }
    }
  }

 private:
  static void QuantizeRow(const float* xp, int t, AtomActivations* out) {
    const QuantSpec& s = out->spec;
    QuantizeActivationRow(xp, s, out->q.data() + static_cast<size_t>(t) * s.k_normal_padded(),
                          out->scales.data() + static_cast<size_t>(t) * s.n_groups(),
                          out->q_outlier.data() + static_cast<size_t>(t) * s.n_outliers,
                          out->outlier_scales.data() + t);
  }
};

}  // namespace

std::unique_ptr<AtomKernels> CreateReferenceAtomKernels() {
  return std::make_unique<ReferenceAtomKernels>();
}

}  // namespace loom::kernels::quant
