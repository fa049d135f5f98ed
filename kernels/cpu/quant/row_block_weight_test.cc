#include "kernels/cpu/quant/row_block_weight.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/atom_format.h"
#include "kernels/quant/atom_test_util.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::cpu::quant {
namespace {

namespace kq = kernels::quant;

// Row r's int value of normal channel j, read from the row-block layout as the header
// describes it.
int PackedNormal(const RowBlockView& v, const kq::QuantSpec& s, int64_t r, int j) {
  const uint8_t* block = v.q + (r / 8) * static_cast<int64_t>(v.block_q_bytes);
  const int lane = static_cast<int>(r % 8);
  if (s.w_bits == 4) {
    const uint8_t b = block[(j / 8) * 32 + 4 * lane + j % 4];
    return ((j % 8) < 4 ? (b & 0xF) : (b >> 4)) - 8;
  }
  return static_cast<int8_t>(block[(j / 4) * 32 + 4 * lane + j % 4]);
}

// Every weight, scale and outlier of 37 rows (a partial last block) is where the header
// says, for 4- and 8-bit weights, groups of 32/64/128 (and 8-bit 20), 0/20/64 outliers;
// padded rows and channels are zero.
TEST(RowBlockWeight, PackPutsEveryValueWhereTheHeaderSays) {
  const int64_t rows = 37;
  for (int w_bits : {4, 8}) {
    for (int group : {32, 64, 128, 20}) {
      if (w_bits == 4 && group % 8 != 0) continue;
      for (int no : {0, 20, 64}) {
        const kq::QuantSpec s{300, no, group, w_bits, 8};
        SCOPED_TRACE("w" + std::to_string(w_bits) + " group " + std::to_string(group) +
                     " outliers " + std::to_string(no));
        ASSERT_TRUE(RowBlockWeight::Supports(s));
        const std::vector<float> wf = kq::testing::RandomValues(rows * s.k, group + no, 0.05f);
        const kq::AtomWeight w = *kq::QuantizeWeightRTN(wf.data(), rows, s);
        const RowBlockWeight p = RowBlockWeight::Pack(w.view());
        const RowBlockView v = p.view();
        ASSERT_EQ(v.rows, rows);
        ASSERT_EQ(v.blocks, 5);
        std::vector<int8_t> q(s.k_normal_padded());
        const int ng = s.n_groups();
        for (int64_t r = 0; r < 40; ++r) {
          if (r < rows) {
            kq::UnpackNormalRow(w.q.data() + r * s.weight_row_bytes(), s, q.data());
          }
          for (int j = 0; j < s.k_normal_padded(); ++j) {
            ASSERT_EQ(PackedNormal(v, s, r, j), r < rows ? q[j] : 0) << "r " << r << " j " << j;
          }
          for (int g = 0; g < ng; ++g) {
            ASSERT_EQ(v.scales[((r / 8) * ng + g) * 8 + r % 8],
                      r < rows ? w.scales[r * ng + g] : 0.0f);
          }
          for (int j = 0; j < 4 * v.outlier_chunks; ++j) {
            const int8_t got = v.q_outlier[(r / 8) * v.outlier_chunks * 32 + (j / 4) * 32 +
                                           4 * (r % 8) + j % 4];
            ASSERT_EQ(got, r < rows && j < no ? w.q_outlier[r * no + j] : 0) << j;
          }
          if (no > 0) {
            ASSERT_EQ(v.outlier_scales[r], r < rows ? w.outlier_scales[r] : 0.0f);
          }
        }
      }
    }
  }
}

TEST(RowBlockWeight, SupportsOnlyGroupsTheChunksTile) {
  EXPECT_TRUE(RowBlockWeight::Supports(kq::QuantSpec{576, 64, 128, 4, 4}));
  EXPECT_TRUE(RowBlockWeight::Supports(kq::QuantSpec{576, 64, 96, 4, 4}));
  EXPECT_FALSE(RowBlockWeight::Supports(kq::QuantSpec{576, 64, 100, 4, 4}));  // 4-bit: % 8
  EXPECT_TRUE(RowBlockWeight::Supports(kq::QuantSpec{576, 64, 100, 8, 8}));   // 8-bit: % 4
  EXPECT_FALSE(RowBlockWeight::Supports(kq::QuantSpec{576, 64, 102, 8, 8}));
  EXPECT_FALSE(RowBlockWeight::Supports(kq::QuantSpec{0, 0, 128, 4, 4}));  // invalid spec
}

}  // namespace
}  // namespace loom::kernels::cpu::quant
