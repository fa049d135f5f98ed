#include "models/quant/clip_search.h"

#include <cstring>

#include "kernels/quant/weight_packing.h"

namespace loom::quant {

std::vector<float> ClipRatios(const ClipSearchMeta& c) {
  if (!c.enabled || c.steps <= 1) return {1.0f};
  std::vector<float> r(c.steps);
  for (int i = 0; i < c.steps; ++i) {
    r[i] = static_cast<float>(1.0 - (1.0 - c.min_ratio) * i / (c.steps - 1));
  }
  return r;
}

double WeightedGroupError(const float* w, const double* e, int n, const int8_t* q, float scale) {
  double err = 0;
  for (int j = 0; j < n; ++j) {
    const double d = static_cast<double>(w[j]) - static_cast<double>(q[j]) * scale;
    err += (e ? e[j] : 1.0) * d * d;
  }
  return err;
}

float QuantizeGroupClipSearch(const float* w, const double* e, int n, int bits,
                              const std::vector<float>& ratios, int8_t* q) {
  const float absmax = kernels::quant::AbsMax(w, n);
  std::vector<int8_t> trial(n);
  float best_scale = 0;
  double best_err = 0;
  for (size_t i = 0; i < ratios.size(); ++i) {
    const float s =
        kernels::quant::QuantizeSymmetricRow(w, n, absmax * ratios[i], bits, trial.data());
    const double err = WeightedGroupError(w, e, n, trial.data(), s);
    if (i == 0 || err < best_err) {
      best_err = err;
      best_scale = s;
      std::memcpy(q, trial.data(), n);
    }
  }
  return best_scale;
}

}  // namespace loom::quant
