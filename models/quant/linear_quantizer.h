// Quantizes one linear layer's weight, already in permuted order, to the Atom format:
// normal groups by clip search (RTN when the grid is {1}) or by GPTQ, outliers INT8 per row.
#ifndef LOOM_MODELS_QUANT_LINEAR_QUANTIZER_H_
#define LOOM_MODELS_QUANT_LINEAR_QUANTIZER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"
#include "kernels/quant/weight_packing.h"
#include "models/quant/gptq.h"

namespace loom::quant {

struct LinearQuantInput {
  const float* w = nullptr;  // [rows, spec.k], permuted columns (and rows where folded)
  int64_t rows = 0;
  kernels::quant::QuantSpec spec;
  const double* energy = nullptr;  // [spec.k] permuted channel energies; null = uniform
  std::vector<float> ratios = {1.0f};  // clip grid (ClipRatios)
  const GptqFactor* gptq = nullptr;    // permuted-order factor; null = clip search / RTN
  bool full_range = false;             // 4-bit codes in [-8, 7] (clip_search.h)
  bool gptq_static_groups = false;     // GptqRowOptions::static_groups
  bool gptq_hessian_scale_search = false;  // GptqRowOptions::hessian_scale_search
  // With refit_scales: every row's scales are refit by least squares, codes fixed
  // (scale_refit.h), against hessian [spec.k, spec.k] (X^T X, permuted order).
  bool refit_scales = false;
  const double* hessian = nullptr;
  int threads = 1;                     // rows are split over this many threads
};

// InvalidArgument for a bad spec, rows <= 0, a GPTQ factor of another width, an empty
// clip grid, refit_scales without a Hessian, or a non-finite weight (naming the row).
absl::StatusOr<kernels::quant::AtomWeight> QuantizeLinear(const LinearQuantInput& in);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_LINEAR_QUANTIZER_H_
