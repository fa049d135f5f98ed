#include "models/quant/clip_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/weight_packing.h"

namespace loom::quant {

WeightGrid GridFor(int bits, bool full_range) {
  const int qmax = kernels::quant::QMax(bits);
  return {full_range && bits == 4 ? -qmax - 1 : -qmax, qmax};
}

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

float QuantizeWithClip(const float* w, int n, float clip, int divisor, WeightGrid grid,
                       int8_t* q) {
  const float fd = static_cast<float>(divisor);
  const float inv = clip > 0.0f ? fd / clip : 0.0f;
  for (int i = 0; i < n; ++i) {
    const float v = std::nearbyint(w[i] * inv);
    q[i] = static_cast<int8_t>(std::clamp(static_cast<int>(v), grid.qmin, grid.qmax));
  }
  return clip / fd;
}

float QuantizeGroupClipSearch(const float* w, const double* e, int n, int bits,
                              const std::vector<float>& ratios, int8_t* q, bool full_range) {
  const float absmax = kernels::quant::AbsMax(w, n);
  const WeightGrid grid = GridFor(bits, full_range);
  const bool extra = grid.qmin < -grid.qmax;
  std::vector<int8_t> trial(n);
  float best_scale = 0;
  double best_err = 0;
  bool first = true;
  for (size_t i = 0; i < ratios.size(); ++i) {
    for (int divisor : {grid.qmax, -grid.qmin}) {
      if (divisor != grid.qmax && !extra) continue;
      const float s = QuantizeWithClip(w, n, absmax * ratios[i], divisor, grid, trial.data());
      const double err = WeightedGroupError(w, e, n, trial.data(), s);
      if (first || err < best_err) {
        first = false;
        best_err = err;
        best_scale = s;
        std::memcpy(q, trial.data(), n);
      }
    }
  }
  return best_scale;
}

}  // namespace loom::quant
