#include "kernels/cpu/quant/row_block_weight.h"

namespace loom::kernels::cpu::quant {

namespace kq = kernels::quant;

namespace {

// Row r's stored 4-bit nibble (q + 8) of normal channel j (atom_format.h's packing).
uint8_t Nibble(const kq::AtomWeightView& w, int64_t r, int j) {
  const int half = w.spec.group / 2, g = j / w.spec.group, i = j % w.spec.group;
  const uint8_t b = w.q[r * static_cast<int64_t>(w.spec.weight_row_bytes()) +
                        static_cast<int64_t>(g) * half + i % half];
  return i < half ? (b & 0x0F) : (b >> 4);
}

}  // namespace

bool RowBlockWeight::Supports(const kq::QuantSpec& spec) {
  if (!spec.Validate().ok()) return false;
  return spec.w_bits == 4 ? spec.group % 8 == 0 : spec.group % 4 == 0;
}

RowBlockWeight RowBlockWeight::Pack(const kq::AtomWeightView& w) {
  const kq::QuantSpec& s = w.spec;
  RowBlockWeight p;
  p.spec_ = s;
  p.rows_ = w.rows;
  const int64_t blocks = (w.rows + kBlockRows - 1) / kBlockRows;
  const int ng = s.n_groups(), no = s.n_outliers;
  const size_t block_q = kBlockRows * s.weight_row_bytes();
  const int oc = (no + 3) / 4;
  p.q_.assign(blocks * block_q, s.w_bits == 4 ? 0x88 : 0);  // padded rows: q = 0
  p.scales_.assign(static_cast<size_t>(blocks) * ng * kBlockRows, 0.0f);
  p.q_outlier_.assign(static_cast<size_t>(blocks) * oc * 32, 0);
  p.outlier_scales_.assign(static_cast<size_t>(blocks) * kBlockRows, 0.0f);
  const size_t row_bytes = s.weight_row_bytes();
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t b = r / kBlockRows;
    const int lane = static_cast<int>(r % kBlockRows);
    uint8_t* qb = p.q_.data() + b * block_q;
    if (s.w_bits == 4) {
      for (int j0 = 0; j0 < s.k_normal_padded(); j0 += 8) {  // chunk index = j0 / 8
        uint8_t* dst = qb + static_cast<size_t>(j0 / 8) * 32 + 4 * lane;
        for (int i = 0; i < 4; ++i) {
          dst[i] = static_cast<uint8_t>(Nibble(w, r, j0 + i) | (Nibble(w, r, j0 + 4 + i) << 4));
        }
      }
    } else {
      const uint8_t* src = w.q + r * static_cast<int64_t>(row_bytes);
      for (int j0 = 0; j0 < s.k_normal_padded(); j0 += 4) {
        uint8_t* dst = qb + static_cast<size_t>(j0 / 4) * 32 + 4 * lane;
        for (int i = 0; i < 4; ++i) dst[i] = src[j0 + i];
      }
    }
    for (int g = 0; g < ng; ++g) {
      p.scales_[(static_cast<size_t>(b) * ng + g) * kBlockRows + lane] = w.scales[r * ng + g];
    }
    if (no > 0) {
      int8_t* ob = p.q_outlier_.data() + static_cast<size_t>(b) * oc * 32;
      for (int j = 0; j < no; ++j) ob[(j / 4) * 32 + 4 * lane + j % 4] = w.q_outlier[r * no + j];
      p.outlier_scales_[static_cast<size_t>(b) * kBlockRows + lane] = w.outlier_scales[r];
    }
  }
  return p;
}

RowBlockView RowBlockWeight::view() const {
  RowBlockView v;
  v.rows = rows_;
  v.blocks = (rows_ + kBlockRows - 1) / kBlockRows;
  v.block_q_bytes = kBlockRows * spec_.weight_row_bytes();
  v.outlier_chunks = (spec_.n_outliers + 3) / 4;
  v.q = q_.data();
  v.scales = scales_.data();
  v.q_outlier = q_outlier_.data();
  v.outlier_scales = outlier_scales_.data();
  return v;
}

}  // namespace loom::kernels::cpu::quant
