#include "models/quant/calibration_stats.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace loom::quant {

QuantActivation ActivationOf(TapPoint p) {
  switch (p) {
    case TapPoint::kAttnNorm: return QuantActivation::kAttnNorm;
    case TapPoint::kAttnOut: return QuantActivation::kAttnOut;
    case TapPoint::kFfnNorm: return QuantActivation::kFfnNorm;
    case TapPoint::kSiluMul: return QuantActivation::kSiluMul;
  }
  return QuantActivation::kAttnNorm;
}

CalibrationTap::CalibrationTap(int n_layers, const std::array<int, kNumQuantActivations>& widths,
                               bool hessian, kernels::Backend* backend)
    : backend_(backend) {
  stats_.has_hessian = hessian;
  stats_.layers.resize(n_layers);
  for (auto& layer : stats_.layers) {
    for (int a = 0; a < kNumQuantActivations; ++a) {
      layer[a].k = widths[a];
      layer[a].energy.assign(widths[a], 0.0);
      if (hessian) layer[a].hessian.assign(static_cast<size_t>(widths[a]) * widths[a], 0.0);
    }
  }
}

void CalibrationTap::Observe(int layer, TapPoint point, const float* x, int n, int k) {
  if (!status_.ok()) return;
  const int a = static_cast<int>(ActivationOf(point));
  if (layer < 0 || layer >= static_cast<int>(stats_.layers.size())) {
    status_ = absl::InternalError(absl::StrCat("calibration: layer ", layer, " out of range"));
    return;
  }
  ActivationStats& s = stats_.layers[layer][a];
  if (k != s.k) {
    status_ = absl::InternalError(absl::StrCat(
        "calibration: layer ", layer, " ", QuantActivationName(static_cast<QuantActivation>(a)),
        " has ", k, " channels, expected ", s.k));
    return;
  }
  if (layer == 0 && a == 0) stats_.tokens += n;
  for (int t = 0; t < n; ++t) {
    const float* row = x + static_cast<size_t>(t) * k;
    for (int j = 0; j < k; ++j) s.energy[j] += static_cast<double>(row[j]) * row[j];
  }
  if (stats_.has_hessian) AddHessian(x, n, k, s.hessian.data());
}

void CalibrationTap::AddHessian(const float* x, int n, int k, double* h) {
  if (backend_ == nullptr) {
    for (int t = 0; t < n; ++t) {
      const float* row = x + static_cast<size_t>(t) * k;
      for (int i = 0; i < k; ++i) {
        const double xi = row[i];
        double* hi = h + static_cast<size_t>(i) * k;
        for (int j = 0; j < k; ++j) hi[j] += xi * row[j];
      }
    }
    return;
  }
  // X^T X = (X^T) (X^T)^T: X^T [k, n_pad] as both the activations and the F32 "weights";
  // padding tokens are zero and add nothing.
  const int n_pad = (n + 31) / 32 * 32;
  xt_.assign(static_cast<size_t>(k) * n_pad, 0.0f);
  for (int t = 0; t < n; ++t) {
    for (int j = 0; j < k; ++j) xt_[static_cast<size_t>(j) * n_pad + t] = x[static_cast<size_t>(t) * k + j];
  }
  prod_.resize(static_cast<size_t>(k) * k);
  backend_->PackActivations(DType::kF32, xt_.data(), k, n_pad, &pack_);
  kernels::WeightMatrix w;
  w.dtype = DType::kF32;
  w.rows = k;
  w.cols = n_pad;
  w.data = reinterpret_cast<const uint8_t*>(xt_.data());
  w.row_bytes = static_cast<size_t>(n_pad) * sizeof(float);
  backend_->MatMul(w, pack_, prod_.data());
  for (size_t i = 0; i < prod_.size(); ++i) h[i] += prod_[i];
}

CalibrationStats CalibrationTap::Take() {
  for (auto& layer : stats_.layers) {
    for (ActivationStats& s : layer) {
      for (double& v : s.hessian) v = static_cast<double>(static_cast<float>(v));
    }
  }
  return std::move(stats_);
}

}  // namespace loom::quant
