#include "models/quant/gptq.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/quant/weight_packing.h"
#include "models/quant/clip_search.h"

namespace loom::quant {
namespace {

// x = l^-1 for lower-triangular l [n, n] (row-major); x lower, zeros above.
std::vector<double> InvertLower(const std::vector<double>& l, int n) {
  std::vector<double> x(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    double* xi = x.data() + static_cast<size_t>(i) * n;
    const double* li = l.data() + static_cast<size_t>(i) * n;
    // Row i of L X = e_i:  x_i = (e_i - sum_{p<i} l[i][p] x_p) / l[i][i].
    for (int p = 0; p < i; ++p) {
      const double c = li[p];
      if (c == 0) continue;
      const double* xp = x.data() + static_cast<size_t>(p) * n;
      for (int j = 0; j <= p; ++j) xi[j] -= c * xp[j];
    }
    xi[i] += 1.0;
    const double inv = 1.0 / li[i];
    for (int j = 0; j <= i; ++j) xi[j] *= inv;
  }
  return x;
}

// The atom_format rule with a fixed scale: q = clamp(nearbyint(x * inv), -qmax, qmax).
inline int8_t QuantizeOne(float x, float inv, int qmax) {
  const float r = std::nearbyint(x * inv);
  return static_cast<int8_t>(std::clamp(r, static_cast<float>(-qmax), static_cast<float>(qmax)));
}

}  // namespace

absl::Status CholeskyLower(double* a, int n) {
  for (int j = 0; j < n; ++j) {
    double* aj = a + static_cast<size_t>(j) * n;
    double s = aj[j];
    for (int p = 0; p < j; ++p) s -= aj[p] * aj[p];
    if (!(s > 0)) {
      return absl::FailedPreconditionError(
          absl::StrCat("Cholesky: pivot ", j, " is ", s, " (matrix not positive definite)"));
    }
    const double d = std::sqrt(s);
    aj[j] = d;
    for (int i = j + 1; i < n; ++i) {
      double* ai = a + static_cast<size_t>(i) * n;
      double t = ai[j];
      for (int p = 0; p < j; ++p) t -= ai[p] * aj[p];
      ai[j] = t / d;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GptqFactor> PrepareGptq(const std::vector<double>& h, int k, double damp_fraction) {
  if (k <= 0 || h.size() != static_cast<size_t>(k) * k) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ: Hessian of ", h.size(), " values is not ", k, " x ", k));
  }
  if (!(damp_fraction >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("GPTQ: damping ", damp_fraction, " < 0"));
  }
  GptqFactor f;
  f.k = k;
  f.diag.resize(k);
  f.dead.assign(k, false);
  // Reversed order: hr[a][b] = h[k-1-a][k-1-b]. Its lower factor Lr gives h = R R^T with
  // R = J Lr J upper, so h^-1 = U^T U with U = R^-1 = J Lr^-1 J.
  std::vector<double> hr(static_cast<size_t>(k) * k);
  double mean = 0;
  for (int i = 0; i < k; ++i) {
    double d = h[static_cast<size_t>(i) * k + i];
    if (!std::isfinite(d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("GPTQ: Hessian diagonal ", i, " is ", d));
    }
    f.diag[i] = d;
    if (d == 0) f.dead[i] = true;
    mean += d == 0 ? 1.0 : d;
  }
  mean /= k;
  const double damp = damp_fraction * mean;
  for (int a = 0; a < k; ++a) {
    const int i = k - 1 - a;
    for (int b = 0; b < k; ++b) {
      const int j = k - 1 - b;
      double v = (f.dead[i] || f.dead[j]) ? 0.0 : h[static_cast<size_t>(i) * k + j];
      if (a == b) v = (f.dead[i] ? 1.0 : v) + damp;
      hr[static_cast<size_t>(a) * k + b] = v;
    }
  }
  if (absl::Status s = CholeskyLower(hr.data(), k); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("GPTQ: damped Hessian: ", s.message()));
  }
  for (int a = 0; a < k; ++a) {
    for (int b = a + 1; b < k; ++b) hr[static_cast<size_t>(a) * k + b] = 0;
  }
  const std::vector<double> x = InvertLower(hr, k);
  f.u.assign(static_cast<size_t>(k) * k, 0.0f);
  for (int a = 0; a < k; ++a) {
    for (int b = a; b < k; ++b) {
      f.u[static_cast<size_t>(a) * k + b] =
          static_cast<float>(x[static_cast<size_t>(k - 1 - a) * k + (k - 1 - b)]);
    }
  }
  return f;
}

void GptqQuantizeRow(float* w, const GptqFactor& f, const kernels::quant::QuantSpec& spec,
                     const std::vector<float>& ratios, int8_t* q, float* scales,
                     int8_t* q_outlier, float* outlier_scale) {
  const int k = spec.k, kn = spec.k_normal(), g = spec.group;
  const int qmax_n = kernels::quant::QMax(spec.w_bits);
  std::fill(q, q + spec.k_normal_padded(), 0);
  for (int j = 0; j < k; ++j) if (f.dead[j]) w[j] = 0;
  std::vector<int8_t> scratch(std::max(g, 1));
  float scale = 0, inv = 0;  // of the current group (or the outlier block)
  int qmax = qmax_n;
  for (int j = 0; j < k; ++j) {
    if (j < kn && j % g == 0) {
      const int n = std::min(g, kn - j);
      scale = QuantizeGroupClipSearch(w + j, f.diag.data() + j, n, spec.w_bits, ratios,
                                      scratch.data());
      scales[j / g] = scale;
      qmax = qmax_n;
    } else if (j == kn) {
      const float absmax = kernels::quant::AbsMax(w + kn, k - kn);
      scale = absmax / 127.0f;
      *outlier_scale = scale;
      qmax = 127;
    }
    inv = scale > 0 ? 1.0f / scale : 0.0f;
    const int8_t qj = QuantizeOne(w[j], inv, qmax);
    if (j < kn) q[j] = qj; else q_outlier[j - kn] = qj;
    const float err = (w[j] - static_cast<float>(qj) * scale) / f.u[static_cast<size_t>(j) * k + j];
    const float* uj = f.u.data() + static_cast<size_t>(j) * k;
    for (int t = j + 1; t < k; ++t) w[t] -= err * uj[t];
  }
}

}  // namespace loom::quant
