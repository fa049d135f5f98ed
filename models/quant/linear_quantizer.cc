#include "models/quant/linear_quantizer.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/quant/clip_search.h"
#include "models/quant/scale_refit.h"

namespace loom::quant {
namespace {

using kernels::quant::AtomWeight;
using kernels::quant::QuantSpec;

void QuantizeRows(const LinearQuantInput& in, int64_t r0, int64_t r1, AtomWeight* out) {
  const QuantSpec& s = in.spec;
  const int kn = s.k_normal(), kp = s.k_normal_padded(), ng = s.n_groups();
  std::vector<int8_t> q(kp);
  std::vector<float> row(s.k);
  GptqRowOptions opts;
  opts.ratios = in.ratios;
  opts.full_range = in.full_range;
  opts.static_groups = in.gptq_static_groups;
  opts.hessian_scale_search = in.gptq_hessian_scale_search;
  for (int64_t r = r0; r < r1; ++r) {
    const float* w = in.w + r * s.k;
    float* scales = out->scales.data() + r * ng;
    int8_t* qo = s.n_outliers > 0 ? out->q_outlier.data() + r * s.n_outliers : nullptr;
    float* os = s.n_outliers > 0 ? out->outlier_scales.data() + r : nullptr;
    if (in.gptq != nullptr) {
      std::copy(w, w + s.k, row.begin());
      float unused = 0;
      GptqQuantizeRow(row.data(), *in.gptq, s, opts, q.data(), scales, qo, os ? os : &unused);
    } else {
      std::fill(q.begin(), q.end(), 0);
      for (int g = 0; g < ng; ++g) {
        const int j = g * s.group, n = std::min(s.group, kn - j);
        scales[g] = QuantizeGroupClipSearch(w + j, in.energy ? in.energy + j : nullptr, n,
                                            s.w_bits, in.ratios, q.data() + j, in.full_range);
      }
      if (s.n_outliers > 0) {
        *os = kernels::quant::QuantizeSymmetricRow(
            w + kn, s.n_outliers, kernels::quant::AbsMax(w + kn, s.n_outliers), 8, qo);
      }
    }
    if (in.refit_scales) RefitRowScales(w, in.hessian, s, q.data(), qo, scales, os);
    kernels::quant::PackNormalRow(q.data(), s, out->q.data() + r * s.weight_row_bytes());
  }
}

}  // namespace

absl::StatusOr<AtomWeight> QuantizeLinear(const LinearQuantInput& in) {
  if (absl::Status st = in.spec.Validate(); !st.ok()) return st;
  const QuantSpec& s = in.spec;
  if (in.rows <= 0 || in.w == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("QuantizeLinear: ", in.rows, " rows"));
  }
  if (in.ratios.empty()) return absl::InvalidArgumentError("QuantizeLinear: empty clip grid");
  if (in.refit_scales && in.hessian == nullptr) {
    return absl::InvalidArgumentError("QuantizeLinear: refit_scales needs the Hessian");
  }
  if (in.gptq != nullptr && in.gptq->k != s.k) {
    return absl::InvalidArgumentError(absl::StrCat("QuantizeLinear: GPTQ factor of width ",
                                                   in.gptq->k, " for k = ", s.k));
  }
  for (int64_t i = 0; i < in.rows * s.k; ++i) {
    if (!std::isfinite(in.w[i])) {
      return absl::InvalidArgumentError(absl::StrCat("QuantizeLinear: weight row ", i / s.k,
                                                     " column ", i % s.k, " is not finite"));
    }
  }
  AtomWeight out;
  out.spec = s;
  out.rows = in.rows;
  out.q.assign(in.rows * s.weight_row_bytes(), 0);
  out.scales.assign(in.rows * s.n_groups(), 0.0f);
  if (s.n_outliers > 0) {
    out.q_outlier.assign(in.rows * s.n_outliers, 0);
    out.outlier_scales.assign(in.rows, 0.0f);
  }
  const int64_t t = std::max<int64_t>(1, std::min<int64_t>(in.threads, in.rows));
  std::vector<std::thread> workers;
  for (int64_t i = 1; i < t; ++i) {
    workers.emplace_back(QuantizeRows, std::cref(in), in.rows * i / t, in.rows * (i + 1) / t,
                         &out);
  }
  QuantizeRows(in, 0, in.rows / t, &out);
  for (std::thread& w : workers) w.join();
  return out;
}

}  // namespace loom::quant
