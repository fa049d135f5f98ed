// Building and reading Atom weights (atom_format.h): the symmetric quantization rule,
// the 4-bit / 8-bit row packing, and a round-to-nearest (RTN) weight quantizer that owns
// its storage. Used by the quantizer (models/quant, which adds clip search / GPTQ on top),
// the runtime and the tests.
#ifndef LOOM_KERNELS_QUANT_WEIGHT_PACKING_H_
#define LOOM_KERNELS_QUANT_WEIGHT_PACKING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"

namespace loom::kernels::quant {

// 7 for 4 bits, 127 for 8 bits (the symmetric range is [-qmax, qmax]).
inline int QMax(int bits) { return bits == 4 ? 7 : 127; }

// max |x[i]| over i < count (0 for count <= 0).
float AbsMax(const float* x, int count);

// The header's rule with a given absmax (a quantizer passes clip * absmax):
//   inv = absmax > 0 ? qmax / absmax : 0;  q[i] = clamp(nearbyint(x[i] * inv), -qmax, qmax)
// (round to nearest even), all in float. Returns scale = absmax / qmax.
// x, q: [count]. bits: 4 or 8.
float QuantizeSymmetricRow(const float* x, int count, float absmax, int bits, int8_t* q);

// Normal part of one weight row: q [spec.k_normal_padded()] int8 values (in [-8, 7] for
// 4 bits) -> out [spec.weight_row_bytes()] in the header's packing.
void PackNormalRow(const int8_t* q, const QuantSpec& spec, uint8_t* out);
// Inverse of PackNormalRow: row [spec.weight_row_bytes()] -> q [spec.k_normal_padded()].
void UnpackNormalRow(const uint8_t* row, const QuantSpec& spec, int8_t* q);

// An owning quantized weight; view() points into it (call it again after a move).
struct AtomWeight {
  QuantSpec spec;
  int64_t rows = 0;
  std::vector<uint8_t> q;               // [rows, spec.weight_row_bytes()]
  std::vector<float> scales;            // [rows, spec.n_groups()]
  std::vector<int8_t> q_outlier;        // [rows, spec.n_outliers]
  std::vector<float> outlier_scales;    // [rows] (empty when n_outliers == 0)
  AtomWeightView view() const;
};

// RTN quantization of w [rows, spec.k] (columns already in permuted order): per (row,
// group) absmax * clip with spec.w_bits, outliers per row absmax * clip in INT8.
// InvalidArgument for a bad spec, rows < 0 or clip not in (0, 1].
absl::StatusOr<AtomWeight> QuantizeWeightRTN(const float* w, int64_t rows,
                                             const QuantSpec& spec, float clip = 1.0f);

// Dequantized weights [w.rows, w.spec.k] in permuted column order (q * scale).
std::vector<float> DequantizeWeight(const AtomWeightView& w);
// Dequantized activations [x.n, x.spec.k] in permuted channel order.
std::vector<float> DequantizeActivations(const AtomActivations& x);

// out[r, j] = in[r, perm[j]] for in, out [rows, k] (perm: [k], a permutation of 0..k-1).
void PermuteColumns(const float* in, int64_t rows, int k, const int32_t* perm, float* out);

}  // namespace loom::kernels::quant

#endif  // LOOM_KERNELS_QUANT_WEIGHT_PACKING_H_
