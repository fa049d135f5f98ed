// Clip search for symmetric weight groups: try absmax * c for c on a grid from 1.0 down to
// min_ratio and keep the c minimising the error weighted by the calibration energy of each
// input channel (diag-Hessian-weighted MSE: sum_j E[x_j^2] (w_j - q_j s)^2). c = 1.0 is on
// the grid, so the result is never worse than round-to-nearest (RTN) on that measure.
//
// Weight code range: symmetric [-qmax, qmax] (qmax = 7 for 4 bits, 127 for 8: the
// atom_format rule) or, for 4-bit weights with `full_range`, [-8, 7]. The format stores
// nibble = q + 8, so -8 is representable and the integer kernels are tested on it
// (kernels/cpu/quant/cpu_atom_kernels_test.cc); a scale stays >= 0, so the extra level
// sits on the negative side. Full range tries, for every c, both s = c * absmax / 7 (the
// symmetric candidate, clamped to [-8, 7]) and s = c * absmax / 8 (the group's most
// negative value may land on -8; a positive extreme is clipped to 7 s), as llama.cpp's
// Q4_0 does with its signed-extreme scale.
#ifndef LOOM_MODELS_QUANT_CLIP_SEARCH_H_
#define LOOM_MODELS_QUANT_CLIP_SEARCH_H_

#include <cstdint>
#include <vector>

#include "models/quant/quantized_checkpoint.h"

namespace loom::quant {

// The integer code range of a weight group.
struct WeightGrid {
  int qmin = -7;
  int qmax = 7;
};

// Symmetric [-QMax(bits), QMax(bits)]; [-8, 7] for bits == 4 with full_range.
WeightGrid GridFor(int bits, bool full_range);

// c_i = 1 - (1 - min_ratio) * i / (steps - 1) for i < steps ({1} when disabled or steps 1).
// REQUIRES: ValidateClipSearch(c) is OK.
std::vector<float> ClipRatios(const ClipSearchMeta& c);

// sum_j e[j] * (w[j] - q[j] * scale)^2 over j < n; e == nullptr weighs every channel 1.
double WeightedGroupError(const float* w, const double* e, int n, const int8_t* q, float scale);

// q[j] = clamp(nearbyint(w[j] * divisor / clip), grid) for j < n; returns clip / divisor
// (0 and all-zero codes when clip is 0). With divisor = grid.qmax and a symmetric grid
// this is bit for bit kernels::quant::QuantizeSymmetricRow.
float QuantizeWithClip(const float* w, int n, float clip, int divisor, WeightGrid grid, int8_t* q);

// Quantizes w [n] to `bits` (4 or 8) with absmax * c for every c in `ratios` (first = 1.0)
// (and, with a full-range grid, the /8 candidate after each), keeps the best by
// WeightedGroupError (ties: the earlier candidate), writes its q [n] and returns its scale.
// e: [n] channel weights (nullable).
float QuantizeGroupClipSearch(const float* w, const double* e, int n, int bits,
                              const std::vector<float>& ratios, int8_t* q,
                              bool full_range = false);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_CLIP_SEARCH_H_
