// GPTQ (Frantar et al., ICLR 2023) for one Atom weight, in the permuted channel order:
// columns are quantized left to right (normal groups, then the INT8 outliers), and each
// column's rounding error is spread over the not-yet-quantized columns through the upper
// Cholesky factor U of the inverse calibration Hessian (U^T U = (H + damp I)^-1,
// H = X^T X). Group scales are chosen when the sweep reaches a group, from the weights
// updated so far (clip-searched like RTN when enabled). Rows are independent given U.
#ifndef LOOM_MODELS_QUANT_GPTQ_H_
#define LOOM_MODELS_QUANT_GPTQ_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"

namespace loom::quant {

// Per activation, shared by every projection that reads it.
struct GptqFactor {
  int k = 0;
  std::vector<float> u;       // [k, k] upper triangular, U^T U = (H + damp I)^-1
  std::vector<double> diag;   // [k] diag(H) (the clip-search channel weights)
  std::vector<bool> dead;     // [k] channels with H[j][j] == 0 (their weights are zeroed)
};

// In-place lower Cholesky of a [n, n] row-major SPD matrix (upper triangle left as is).
// FailedPrecondition if a pivot is not positive.
absl::Status CholeskyLower(double* a, int n);

// h: [k, k] symmetric in the permuted order. damp_fraction * mean(diag) is added to the
// diagonal (dead channels get 1 first). FailedPrecondition if the damped matrix is still
// not positive definite; InvalidArgument for a size mismatch or damp_fraction < 0.
absl::StatusOr<GptqFactor> PrepareGptq(const std::vector<double>& h, int k, double damp_fraction);

// Quantizes one permuted weight row w [spec.k] (used as scratch: overwritten) into
// q [spec.k_normal_padded()] (zero padded), scales [spec.n_groups()],
// q_outlier [spec.n_outliers] and *outlier_scale (untouched when no outliers).
// ratios: the clip grid (ClipRatios); {1} = plain absmax.
void GptqQuantizeRow(float* w, const GptqFactor& f, const kernels::quant::QuantSpec& spec,
                     const std::vector<float>& ratios, int8_t* q, float* scales,
                     int8_t* q_outlier, float* outlier_scale);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_GPTQ_H_
