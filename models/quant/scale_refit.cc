#include "models/quant/scale_refit.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::quant {
namespace {

// Solves a x = b for SPD a [n, n] (row-major, destroyed) by Cholesky; false if a pivot is
// not positive.
bool SolveSpd(std::vector<double>& a, std::vector<double>& b, int n) {
  for (int j = 0; j < n; ++j) {
    double s = a[j * n + j];
    for (int p = 0; p < j; ++p) s -= a[j * n + p] * a[j * n + p];
    if (!(s > 0)) return false;
    const double d = std::sqrt(s);
    a[j * n + j] = d;
    for (int i = j + 1; i < n; ++i) {
      double t = a[i * n + j];
      for (int p = 0; p < j; ++p) t -= a[i * n + p] * a[j * n + p];
      a[i * n + j] = t / d;
    }
  }
  for (int i = 0; i < n; ++i) {  // L y = b
    double t = b[i];
    for (int p = 0; p < i; ++p) t -= a[i * n + p] * b[p];
    b[i] = t / a[i * n + i];
  }
  for (int i = n - 1; i >= 0; --i) {  // L^T x = y
    double t = b[i];
    for (int p = i + 1; p < n; ++p) t -= a[p * n + i] * b[p];
    b[i] = t / a[i * n + i];
  }
  return true;
}

}  // namespace

bool RefitRowScales(const float* w, const double* h, const kernels::quant::QuantSpec& spec,
                    const int8_t* q, const int8_t* q_outlier, float* scales,
                    float* outlier_scale) {
  const int k = spec.k, kn = spec.k_normal(), g = spec.group, ng = spec.n_groups();
  const int no = spec.n_outliers;
  const int n = ng + (no > 0 ? 1 : 0);
  // Block a covers columns [lo(a), hi(a)); codes code(j).
  auto lo = [&](int a) { return a < ng ? a * g : kn; };
  auto hi = [&](int a) { return a < ng ? std::min((a + 1) * g, kn) : k; };
  auto code = [&](int j) { return static_cast<double>(j < kn ? q[j] : q_outlier[j - kn]); };
  // hv[a] = H v_a [k].
  std::vector<double> hv(static_cast<size_t>(n) * k, 0.0);
  for (int a = 0; a < n; ++a) {
    double* out = hv.data() + static_cast<size_t>(a) * k;
    for (int i = 0; i < k; ++i) {
      const double* hi_row = h + static_cast<size_t>(i) * k;
      double s = 0;
      for (int j = lo(a); j < hi(a); ++j) s += hi_row[j] * code(j);
      out[i] = s;
    }
  }
  std::vector<double> A(static_cast<size_t>(n) * n), b(n), s_old(n);
  double trace = 0;
  for (int a = 0; a < n; ++a) {
    const double* hva = hv.data() + static_cast<size_t>(a) * k;
    double bw = 0;
    for (int i = 0; i < k; ++i) bw += hva[i] * w[i];
    b[a] = bw;
    for (int c = 0; c < n; ++c) {
      double v = 0;
      for (int j = lo(c); j < hi(c); ++j) v += hva[j] * code(j);
      A[a * n + c] = v;
    }
    trace += A[a * n + a];
    s_old[a] = a < ng ? scales[a] : *outlier_scale;
  }
  if (!(trace > 0)) return false;
  // Blocks whose codes are all zero (or that H does not see) keep their scale: pin them
  // with a unit diagonal and a right-hand side equal to the old scale.
  const std::vector<double> A0 = A, b0 = b;
  std::vector<bool> pinned(n);
  for (int a = 0; a < n; ++a) pinned[a] = A0[a * n + a] <= 1e-12 * trace;
  for (int a = 0; a < n; ++a) {
    if (!pinned[a]) continue;
    for (int c = 0; c < n; ++c) {
      if (!pinned[c]) b[c] -= A0[c * n + a] * s_old[a];
      A[a * n + c] = A[c * n + a] = 0;
    }
    A[a * n + a] = 1;
    b[a] = s_old[a];
  }
  std::vector<double> x = b;
  if (!SolveSpd(A, x, n)) return false;
  for (int a = 0; a < n; ++a) {
    if (!std::isfinite(x[a]) || x[a] < 0) return false;
  }
  // err(s) - w^T H w = s^T A0 s - 2 s^T b0; compare in float-rounded scales.
  auto objective = [&](const std::vector<double>& s) {
    double o = 0;
    for (int a = 0; a < n; ++a) {
      double t = 0;
      for (int c = 0; c < n; ++c) t += A0[a * n + c] * s[c];
      o += s[a] * t - 2 * s[a] * b0[a];
    }
    return o;
  };
  std::vector<double> xf(n);
  for (int a = 0; a < n; ++a) xf[a] = static_cast<float>(x[a]);
  if (!(objective(xf) < objective(s_old))) return false;
  for (int a = 0; a < ng; ++a) scales[a] = static_cast<float>(x[a]);
  if (no > 0) *outlier_scale = static_cast<float>(x[ng]);
  return true;
}

}  // namespace loom::quant
