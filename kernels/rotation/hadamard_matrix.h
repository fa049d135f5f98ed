// Hadamard matrices: n x n matrices H with entries +1/-1 and H Hᵀ = n I. They exist only
// for n = 1, 2 and multiples of 4; this file builds the orders the rotation code needs:
//   - Sylvester: n = 2^m, H_2m = [[H_m, H_m], [H_m, -H_m]] (natural order: H[i][j] =
//     (-1)^popcount(i & j)), applied fast by butterflies;
//   - Paley I (q prime, q = 3 mod 4): order q + 1; Paley II (q prime, q = 1 mod 4):
//     order 2 (q + 1). Both from the quadratic character chi mod q (Jacobsthal matrix
//     Q[i][j] = chi(j - i)): Paley I  H = I + [[0, 1ᵀ], [-1, Q]];
//     Paley II H = C ⊗ [[1, 1], [1, -1]] + I ⊗ [[1, -1], [-1, -1]], C = [[0, 1ᵀ], [1, Q]].
// A Kronecker product of Hadamard matrices is one, so every n = K * 2^m with K a base order
// below has one (QuaRot's construction for widths that are not powers of two: SmolLM2's
// 576 = 36 * 16 and 1536 = 12 * 128).
#ifndef LOOM_KERNELS_ROTATION_HADAMARD_MATRIX_H_
#define LOOM_KERNELS_ROTATION_HADAMARD_MATRIX_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::kernels {

// The non-power-of-two base orders built here (each not divisible by 8, so that every
// n has at most one decomposition n = K * 2^m with K in this list or K = 1), ascending.
const std::vector<int>& HadamardBaseOrders();

// The base order K of n: the K of HadamardBaseOrders() (or 1) with n / K a power of two.
// Unimplemented naming n when there is none (e.g. n = 9, or 11008 = 172 * 64).
absl::StatusOr<int> HadamardBaseOrder(int n);

// The ±1 Hadamard matrix of order `order` (1, a power of two, or a base order), row-major
// [order, order]. Unimplemented for any other order.
absl::StatusOr<std::vector<int8_t>> HadamardMatrix(int order);

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_ROTATION_HADAMARD_MATRIX_H_
