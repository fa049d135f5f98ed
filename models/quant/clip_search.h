// Clip search for symmetric weight groups: try absmax * c for c on a grid from 1.0 down to
// min_ratio and keep the c minimising the error weighted by the calibration energy of each
// input channel (diag-Hessian-weighted MSE: sum_j E[x_j^2] (w_j - q_j s)^2). c = 1.0 is on
// the grid, so the result is never worse than round-to-nearest (RTN) on that measure.
#ifndef LOOM_MODELS_QUANT_CLIP_SEARCH_H_
#define LOOM_MODELS_QUANT_CLIP_SEARCH_H_

#include <cstdint>
#include <vector>

#include "models/quant/quantized_checkpoint.h"

namespace loom::quant {

// c_i = 1 - (1 - min_ratio) * i / (steps - 1) for i < steps ({1} when disabled or steps 1).
// REQUIRES: ValidateClipSearch(c) is OK.
std::vector<float> ClipRatios(const ClipSearchMeta& c);

// sum_j e[j] * (w[j] - q[j] * scale)^2 over j < n; e == nullptr weighs every channel 1.
double WeightedGroupError(const float* w, const double* e, int n, const int8_t* q, float scale);

// Quantizes w [n] to `bits` (4 or 8) by the atom_format rule with absmax * c for every c in
// `ratios` (first = 1.0), keeps the best by WeightedGroupError (ties: the earlier c), writes
// its q [n] and returns its scale. e: [n] channel weights (nullable).
float QuantizeGroupClipSearch(const float* w, const double* e, int n, int bits,
                              const std::vector<float>& ratios, int8_t* q);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_CLIP_SEARCH_H_
