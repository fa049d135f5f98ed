// Outlier selection by activation energy and the folding of a channel permutation into
// weights (Atom: the permutation is static and applied offline).
#ifndef LOOM_MODELS_QUANT_CHANNEL_PERMUTATION_H_
#define LOOM_MODELS_QUANT_CHANNEL_PERMUTATION_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::quant {

// perm [k] for an activation whose channel energies (sum of x^2 over calibration tokens)
// are energy [k]: the k - n_outliers normal channels in ascending channel order, then the
// n_outliers highest-energy channels (ties: the lower channel index wins) in ascending
// channel order. Permuted channel j is original channel perm[j]. InvalidArgument for
// n_outliers outside [0, k], an empty or non-finite energy.
absl::StatusOr<std::vector<int32_t>> OutlierPermutation(const std::vector<double>& energy,
                                                        int n_outliers);

// OWQ-style outlier scores (Lee et al., "OWQ: Outlier-Aware Weight Quantization", AAAI
// 2024: sensitivity of input channel j = H_jj * ||dW[:, j]||^2, dW the low-bit weight's
// quantization error): score_j = energy_j * sum over the weights reading the activation of
// sum_r (w[r, j] - RTN(w)[r, j])^2, RTN symmetric `bits` per (row, group of `group`
// consecutive ORIGINAL channels, the last one shorter). Channels that cost the most output
// error at low precision get the INT8 slots; with 8-bit activations (W4A8) that matters
// more than the activation range. weights: {pointer, rows} pairs, each [rows, k] row-major.
// InvalidArgument for an energy that is empty or not finite, a group <= 0, no weights.
absl::StatusOr<std::vector<double>> OwqScores(
    const std::vector<double>& energy, const std::vector<std::pair<const float*, int64_t>>& weights,
    int group, int bits);

// True when perm is a permutation of 0..k-1.
bool IsPermutation(const int32_t* perm, int64_t k);

// out[j] = in[perm[j]] (a vector in permuted order).
std::vector<double> PermuteVector(const std::vector<double>& in, const std::vector<int32_t>& perm);

// out [rows.size(), cols]: out[i, :] = w[rows[i], :] for w [*, cols] (rows: [n] indices).
std::vector<float> GatherRows(const float* w, int64_t cols, const std::vector<int32_t>& rows);

// h' [k, k]: h'[i, j] = h[perm[i], perm[j]] (a Hessian in permuted order).
std::vector<double> PermuteSymmetric(const std::vector<double>& h, const std::vector<int32_t>& perm);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_CHANNEL_PERMUTATION_H_
