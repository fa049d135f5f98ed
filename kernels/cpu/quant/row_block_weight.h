// The CPU Atom kernels' prepared weight layout ("row blocks"): 8 output rows interleaved so
// that one 32-byte vector holds the same few input channels of 8 rows. A tile then keeps
// one int32 lane per ROW: the group's integer dots come out of the multiply-adds already
// one per lane, with no horizontal reduction, and the float epilogue (convert, scale,
// fma) runs once per 8 rows x 1 token instead of once per 8 (row, token) pairs.
//
// Rows are padded to a multiple of 8 with zero weights and zero scales (never stored).
// Block b holds rows [8b, 8b + 8); within one block, lane r is row 8b + r.
//   normal part, 4-bit: for each group g, for each chunk c < group / 8 of 8 channels
//     j0 = g * group + 8c: 32 bytes; byte 4r + i holds row r's nibble (q + 8) of channel
//     j0 + i in its LOW half and of channel j0 + 4 + i in its HIGH half (i < 4).
//   normal part, 8-bit: for each group g, for each chunk c < group / 4 of 4 channels
//     j0 = g * group + 4c: 32 bytes; byte 4r + i = row r's int8 of channel j0 + i.
//   scales: for each group g, 8 floats (rows).
//   outliers: for each chunk c < ceil(n_outliers / 4): 32 bytes, byte 4r + i = row r's
//     int8 outlier weight i of chunk c (0 beyond n_outliers); then 8 outlier scales.
#ifndef LOOM_KERNELS_CPU_QUANT_ROW_BLOCK_WEIGHT_H_
#define LOOM_KERNELS_CPU_QUANT_ROW_BLOCK_WEIGHT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/quant/atom_format.h"

namespace loom::kernels::cpu::quant {

inline constexpr int kBlockRows = 8;

// Plain pointers into a RowBlockWeight, for the per-ISA kernels.
struct RowBlockView {
  int64_t rows = 0;
  int64_t blocks = 0;                 // ceil(rows / 8)
  size_t block_q_bytes = 0;           // 8 * spec.weight_row_bytes()
  int outlier_chunks = 0;             // ceil(n_outliers / 4)
  const uint8_t* q = nullptr;         // [blocks][block_q_bytes]
  const float* scales = nullptr;      // [blocks][n_groups][8]
  const int8_t* q_outlier = nullptr;  // [blocks][outlier_chunks][32]
  const float* outlier_scales = nullptr;  // [blocks][8]
};

class RowBlockWeight final : public kernels::quant::PreparedAtomWeight {
 public:
  // Whether the layout exists for `spec`: 4-bit groups a multiple of 8, 8-bit groups a
  // multiple of 4 (every group the vector tiles take).
  static bool Supports(const kernels::quant::QuantSpec& spec);
  // REQUIRES: Supports(w.spec) and w.rows > 0.
  static RowBlockWeight Pack(const kernels::quant::AtomWeightView& w);

  const kernels::quant::QuantSpec& spec() const { return spec_; }
  RowBlockView view() const;

 private:
  kernels::quant::QuantSpec spec_;
  int64_t rows_ = 0;
  std::vector<uint8_t> q_;
  std::vector<float> scales_;
  std::vector<int8_t> q_outlier_;
  std::vector<float> outlier_scales_;
};

}  // namespace loom::kernels::cpu::quant

#endif  // LOOM_KERNELS_CPU_QUANT_ROW_BLOCK_WEIGHT_H_
