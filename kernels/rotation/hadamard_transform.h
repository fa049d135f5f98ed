// The orthogonal transform T = (I_B ⊗ scale · (H_K ⊗ H_P)) · diag(s) on vectors of length
// n = B · K · P (H_K a base-order Hadamard matrix from hadamard_matrix.h, or [1]; H_P the
// natural-order Sylvester matrix of order P = 2^m; scale = 1/sqrt(K · P); s optional
// signs ±1, all +1 when absent; B = 1 for a full transform, B > 1 for a block-diagonal
// one over B blocks of K · P values, for widths that have no Hadamard matrix, e.g.
// 1472 = 23 x 64). With random signs this is QuaRot's "randomized Hadamard".
//
// Index layout: element i = c · KP + a · P + b (c < B, a < K, b < P), so H_P acts on each
// contiguous run of P values and H_K across the K runs of one block.
//
// Canonical sequence (every implementation, CPU vector code and CUDA, performs exactly
// these float operations in this order per element, so all agree bitwise):
//   Forward, y = T x (steps 2-4 in each of the B blocks independently):
//     1. x[i] *= s[i]                       (exact: a sign flip; skipped without signs)
//     2. each run of P: butterflies for h = 1, 2, 4, ..., P/2: for every pair (j, j + h)
//        with bit h of j clear: (u, v) -> (u + v, u - v)
//     3. across blocks, for every b: z[a][b] = H_K[a][0] x[0][b], then for a' = 1 .. K-1
//        z[a][b] = z[a][b] + x[a'][b] (H_K[a][a'] = +1) or z[a][b] - x[a'][b] (-1)
//     4. y[i] = z[i] * scale                (scale = float(1 / sqrt(double(K * P))))
//   Transpose, y = Tᵀ x: steps 2, 3 with H_Kᵀ (H_K[a'][a] in place of H_K[a][a']), 4, then
//   1. (Tᵀ = T⁻¹: the transpose undoes the forward transform up to rounding.)
#ifndef LOOM_KERNELS_ROTATION_HADAMARD_TRANSFORM_H_
#define LOOM_KERNELS_ROTATION_HADAMARD_TRANSFORM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::kernels {

class HadamardTransform {
 public:
  // T for length n (see hadamard_matrix.h for the n that have one: Unimplemented
  // otherwise). `signs`: empty, or n values each exactly +1 or -1 (InvalidArgument else).
  // `block` > 0: the block-diagonal T over n / block blocks of `block` values (n a
  // multiple of block, which must have a Hadamard matrix); 0: the full transform.
  static absl::StatusOr<HadamardTransform> Create(int n, std::vector<float> signs = {},
                                                  int block = 0);

  // The full transform when n has a Hadamard matrix, else the block-diagonal one with the
  // largest power-of-two block (>= 16) dividing n; Unimplemented when there is none.
  static absl::StatusOr<HadamardTransform> CreateFullOrBlocked(int n, std::vector<float> signs = {});

  // n random signs from `seed` (splitmix64, platform independent).
  static std::vector<float> RandomSigns(int n, uint64_t seed);

  int n() const { return n_; }
  int base() const { return k_; }    // K
  int block() const { return p_; }   // P
  int blocks() const { return b_; }  // B
  float scale() const { return scale_; }
  const std::vector<int8_t>& base_matrix() const { return hk_; }  // [K, K] row-major
  const std::vector<float>& signs() const { return signs_; }      // [n] or empty

  // x [rows, n] row-major; every row x <- T x (transpose: x <- Tᵀ x) in place, in the
  // canonical sequence above. The reference implementation (scalar).
  void Apply(float* x, int64_t rows, bool transpose = false) const;

  // The explicit matrix T (transpose: Tᵀ) [n, n] row-major in double, from the ±1
  // matrices' Kronecker product: Apply(x) = Dense() · x up to float rounding (tests).
  // (Zero off the diagonal blocks.)
  std::vector<double> Dense(bool transpose = false) const;

  // FNV-1a 64 over n, K, P, B, the base matrix, the signs and the scale's bits: equal for
  // equal transforms (a checkpoint records it; a reader that rebuilds a different T
  // refuses the checkpoint).
  uint64_t Fingerprint() const;

 private:
  HadamardTransform() = default;
  // Steps 2-4 on one block v [K * P]; z: scratch [K * P].
  void ApplyBlock(float* v, bool transpose, float* z) const;

  int n_ = 0, k_ = 1, p_ = 1, b_ = 1;
  float scale_ = 1.0f;
  std::vector<int8_t> hk_;    // [K, K]
  std::vector<float> signs_;  // [n] or empty
};

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_ROTATION_HADAMARD_TRANSFORM_H_
