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

// The atom_format rule with a fixed scale: q = clamp(nearbyint(x * inv), qmin, qmax).
inline int8_t QuantizeOne(float x, float inv, int qmin, int qmax) {
  const float r = std::nearbyint(x * inv);
  return static_cast<int8_t>(std::clamp(r, static_cast<float>(qmin), static_cast<float>(qmax)));
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

absl::StatusOr<std::vector<int>> ActOrder(const std::vector<double>& diag, int n_outliers) {
  const int k = static_cast<int>(diag.size());
  if (n_outliers < 0 || n_outliers > k) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ act order: ", n_outliers, " outliers for ", k, " columns"));
  }
  std::vector<int> order(k);
  for (int j = 0; j < k; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.begin() + (k - n_outliers),
                   [&](int a, int b) { return diag[a] > diag[b]; });
  return order;
}

absl::StatusOr<GptqFactor> PrepareGptq(const std::vector<double>& h, int k, double damp_fraction,
                                       const std::vector<int>& order) {
  if (k <= 0 || h.size() != static_cast<size_t>(k) * k) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ: Hessian of ", h.size(), " values is not ", k, " x ", k));
  }
  if (!(damp_fraction >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("GPTQ: damping ", damp_fraction, " < 0"));
  }
  std::vector<int> ord(k);
  for (int j = 0; j < k; ++j) ord[j] = j;
  if (!order.empty()) {
    if (order.size() != static_cast<size_t>(k)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPTQ: sweep order of ", order.size(), " columns for k = ", k));
    }
    std::vector<bool> seen(k, false);
    for (int c : order) {
      if (c < 0 || c >= k || seen[c]) {
        return absl::InvalidArgumentError("GPTQ: sweep order is not a permutation");
      }
      seen[c] = true;
    }
    ord = order;
  }
  GptqFactor f;
  f.k = k;
  f.order = order;
  f.diag.resize(k);
  f.dead.assign(k, false);
  // Sweep order: hp[a][b] = h[ord[a]][ord[b]]. Reversed: hr[a][b] = hp[k-1-a][k-1-b]. Its
  // lower factor Lr gives hp = R R^T with R = J Lr J upper, so hp^-1 = U^T U with
  // U = R^-1 = J Lr^-1 J.
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
    const int i = ord[k - 1 - a];
    for (int b = 0; b < k; ++b) {
      const int j = ord[k - 1 - b];
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

namespace {

// The scale of the normal group of n columns starting at sweep position i0 == column c0
// (natural order) minimising the group's GPTQ loss: for each clip candidate, the group's
// columns are quantized in turn with each error propagated to the group's later columns.
float HessianScaleSearch(const float* w, const GptqFactor& f, int i0, int n, WeightGrid grid,
                         const std::vector<float>& ratios) {
  const int k = f.k;
  const float absmax = kernels::quant::AbsMax(w, n);
  const bool extra = grid.qmin < -grid.qmax;
  std::vector<float> tmp(n);
  float best_scale = 0;
  double best_loss = 0;
  bool first = true;
  for (float r : ratios) {
    for (int divisor : {grid.qmax, -grid.qmin}) {
      if (divisor != grid.qmax && !extra) continue;
      const float scale = absmax * r / static_cast<float>(divisor);
      const float inv = scale > 0 ? 1.0f / scale : 0.0f;
      std::copy(w, w + n, tmp.begin());
      double loss = 0;
      for (int j = 0; j < n; ++j) {
        const float* uj = f.u.data() + static_cast<size_t>(i0 + j) * k + i0;
        const float qj = std::clamp(std::nearbyint(tmp[j] * inv), static_cast<float>(grid.qmin),
                                    static_cast<float>(grid.qmax));
        const float err = (tmp[j] - qj * scale) / uj[j];
        loss += static_cast<double>(err) * err;
        for (int t = j + 1; t < n; ++t) tmp[t] -= err * uj[t];
      }
      if (first || loss < best_loss) {
        first = false;
        best_loss = loss;
        best_scale = scale;
      }
    }
  }
  return best_scale;
}

}  // namespace

void GptqQuantizeRow(float* w, const GptqFactor& f, const kernels::quant::QuantSpec& spec,
                     const GptqRowOptions& o, int8_t* q, float* scales, int8_t* q_outlier,
                     float* outlier_scale) {
  const int k = spec.k, kn = spec.k_normal(), g = spec.group, ng = spec.n_groups();
  const WeightGrid grid_n = GridFor(spec.w_bits, o.full_range);
  const bool natural = f.order.empty();
  std::fill(q, q + spec.k_normal_padded(), 0);
  for (int j = 0; j < k; ++j) if (f.dead[j]) w[j] = 0;
  std::vector<int8_t> scratch(std::max(g, 1));
  std::vector<bool> scaled(ng, false);
  bool outliers_scaled = false;
  float outlier_s = 0;
  if (o.static_groups) {
    for (int gi = 0; gi < ng; ++gi) {
      const int j = gi * g;
      scales[gi] = QuantizeGroupClipSearch(w + j, f.diag.data() + j, std::min(g, kn - j),
                                           spec.w_bits, o.ratios, scratch.data(), o.full_range);
      scaled[gi] = true;
    }
  }
  const bool hessian_search = o.hessian_scale_search && natural && !o.static_groups;
  for (int i = 0; i < k; ++i) {
    const int c = natural ? i : f.order[i];
    float scale;
    WeightGrid grid = grid_n;
    if (c < kn) {
      const int gi = c / g;
      if (!scaled[gi]) {
        const int j = gi * g, n = std::min(g, kn - j);
        scales[gi] = hessian_search
                         ? HessianScaleSearch(w + j, f, i, n, grid_n, o.ratios)
                         : QuantizeGroupClipSearch(w + j, f.diag.data() + j, n, spec.w_bits,
                                                   o.ratios, scratch.data(), o.full_range);
        scaled[gi] = true;
      }
      scale = scales[gi];
    } else {
      if (!outliers_scaled) {
        outlier_s = kernels::quant::AbsMax(w + kn, k - kn) / 127.0f;
        *outlier_scale = outlier_s;
        outliers_scaled = true;
      }
      scale = outlier_s;
      grid = {-127, 127};
    }
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    const int8_t qj = QuantizeOne(w[c], inv, grid.qmin, grid.qmax);
    if (c < kn) q[c] = qj; else q_outlier[c - kn] = qj;
    const float* ui = f.u.data() + static_cast<size_t>(i) * k;
    const float err = (w[c] - static_cast<float>(qj) * scale) / ui[i];
    if (natural) {
      for (int t = i + 1; t < k; ++t) w[t] -= err * ui[t];
    } else {
      for (int t = i + 1; t < k; ++t) w[f.order[t]] -= err * ui[t];
    }
  }
}

}  // namespace loom::quant
