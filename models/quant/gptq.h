// GPTQ (Frantar et al., ICLR 2023) for one Atom weight, in the permuted channel order:
// columns are quantized left to right (normal groups, then the INT8 outliers), and each
// column's rounding error is spread over the not-yet-quantized columns through the upper
// Cholesky factor U of the inverse calibration Hessian (U^T U = (H + damp I)^-1,
// H = X^T X). Group scales are chosen when the sweep reaches a group, from the weights
// updated so far (clip-searched like RTN when enabled). Rows are independent given U.
//
// Options (GptqRowOptions, all off = the plain algorithm above):
// - act order (GPTQ paper, "act-order"): the sweep visits the NORMAL columns by
//   descending diag(H) (ties: ascending column), then the INT8 outlier block in its own
//   order, so outliers still come last and absorb every normal column's error. Groups stay
//   the format's contiguous column ranges; a group's scale is fixed when the sweep first
//   touches one of its columns (from the weights updated so far), or before the sweep with
//   static groups. With the natural order this is exactly the plain algorithm.
// - static groups: every normal group's scale is chosen before the sweep from the original
//   weights (same clip search), so groups do not depend on the visiting order.
// - Hessian scale search (natural order, dynamic groups only): for each candidate clip
//   ratio the group's own GPTQ sweep is simulated (its columns quantized in turn, each
//   error propagated to the group's later columns through U) and the candidate with the
//   least GPTQ loss sum_j ((w_j - q_j s) / U_jj)^2 is kept: the exact increase of
//   ||X (W - Q)^T||^2 caused by the group given the columns before it (the OBS identity
//   GPTQ rests on). The diag-weighted clip search ignores the correlations within a group.
// - full range: 4-bit codes in [-8, 7] (clip_search.h).
#ifndef LOOM_MODELS_QUANT_GPTQ_H_
#define LOOM_MODELS_QUANT_GPTQ_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"

namespace loom::quant {

// Per activation, shared by every projection that reads it.
// u is in SWEEP order: row/column i is column order[i] of the weight (i when order is
// empty); diag and dead are in column order.
struct GptqFactor {
  int k = 0;
  std::vector<int> order;     // [k] sweep position -> column; empty = natural order
  std::vector<float> u;       // [k, k] upper triangular, U^T U = (P (H + damp I) P^T)^-1
  std::vector<double> diag;   // [k] diag(H) (the clip-search channel weights)
  std::vector<bool> dead;     // [k] channels with H[j][j] == 0 (their weights are zeroed)
};

struct GptqRowOptions {
  std::vector<float> ratios = {1.0f};  // the clip grid (ClipRatios); {1} = plain absmax
  bool full_range = false;             // 4-bit codes in [-8, 7]
  bool static_groups = false;          // normal group scales fixed before the sweep
  bool hessian_scale_search = false;   // GPTQ-loss scale search (natural order, dynamic)
};

// In-place lower Cholesky of a [n, n] row-major SPD matrix (upper triangle left as is).
// FailedPrecondition if a pivot is not positive.
absl::Status CholeskyLower(double* a, int n);

// The act order for a weight of k columns whose last n_outliers are the outlier block:
// columns [0, k - n_outliers) by descending diag (ties: ascending index), then the outlier
// columns ascending. InvalidArgument unless diag has k values and 0 <= n_outliers <= k.
absl::StatusOr<std::vector<int>> ActOrder(const std::vector<double>& diag, int n_outliers);

// h: [k, k] symmetric in the permuted (column) order. damp_fraction * mean(diag) is added
// to the diagonal (dead channels get 1 first). order: the sweep order (empty = natural),
// a permutation of [0, k). FailedPrecondition if the damped matrix is still not positive
// definite; InvalidArgument for a size mismatch, a bad order or damp_fraction < 0.
absl::StatusOr<GptqFactor> PrepareGptq(const std::vector<double>& h, int k, double damp_fraction,
                                       const std::vector<int>& order = {});

// Quantizes one permuted weight row w [spec.k] (used as scratch: overwritten) into
// q [spec.k_normal_padded()] (zero padded), scales [spec.n_groups()],
// q_outlier [spec.n_outliers] and *outlier_scale (untouched when no outliers).
// The outlier block's scale is fixed when the sweep reaches its first column (absmax / 127).
// REQUIRES: f.k == spec.k; with f.order, every normal column precedes every outlier one
// (ActOrder's shape); hessian_scale_search only with an empty f.order and dynamic groups
// (it is ignored otherwise).
void GptqQuantizeRow(float* w, const GptqFactor& f, const kernels::quant::QuantSpec& spec,
                     const GptqRowOptions& o, int8_t* q, float* scales, int8_t* q_outlier,
                     float* outlier_scale);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_GPTQ_H_
