#include "models/llama/quantized_head.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "kernels/quant/weight_packing.h"

namespace loom {
namespace {

// A [rows, k] F32 matrix with a few high-energy columns (as embeddings have).
std::vector<float> Matrix(int64_t rows, int k, const std::vector<int>& loud, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(rows) * k);
  for (float& v : w) v = nd(rng);
  for (int64_t r = 0; r < rows; ++r) {
    for (int j : loud) w[r * k + j] *= 25.0f;
  }
  return w;
}

TEST(QuantizedHead, OutlierCountFollowsHiddenSize) {
  EXPECT_EQ(HeadOutliers(576), 64);
  EXPECT_EQ(HeadOutliers(4096), 128);
  EXPECT_EQ(HeadOutliers(2048), 128);
  EXPECT_EQ(HeadOutliers(256), 32);
  EXPECT_EQ(HeadOutliers(64), 0);
}

// The loudest columns go last (into the INT8 outlier block), the permutation is complete,
// and every dequantized weight is within half a quantization step of the original.
TEST(QuantizedHead, PermutesLoudColumnsLastAndQuantizesWithinHalfAStep) {
  const int64_t rows = 300;
  const int k = 576;
  std::vector<int> loud;
  for (int i = 0; i < 64; ++i) loud.push_back((i * 37 + 5) % k);
  const std::vector<float> w = Matrix(rows, k, loud, 1);
  const kernels::WeightMatrix m{DType::kF32, rows, k, reinterpret_cast<const uint8_t*>(w.data()),
                                static_cast<size_t>(k) * sizeof(float)};
  absl::StatusOr<QuantizedHead> h = QuantizeOutputHead(m);
  ASSERT_TRUE(h.ok()) << h.status();
  const kernels::quant::QuantSpec& s = h->weight.spec;
  EXPECT_EQ(s.k, k);
  EXPECT_EQ(s.n_outliers, 64);
  EXPECT_EQ(s.w_bits, 8);
  EXPECT_EQ(s.a_bits, 8);
  EXPECT_EQ(s.group, kHeadGroup);
  std::vector<bool> seen(k, false), is_loud(k, false);
  for (int j : loud) is_loud[j] = true;
  for (int j = 0; j < k; ++j) {
    ASSERT_GE(h->perm[j], 0);
    ASSERT_LT(h->perm[j], k);
    ASSERT_FALSE(seen[h->perm[j]]);
    seen[h->perm[j]] = true;
    EXPECT_EQ(is_loud[h->perm[j]], j >= k - 64) << "position " << j;
  }
  const std::vector<float> deq = kernels::quant::DequantizeWeight(h->weight.view());
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) {
      const bool outlier = j >= s.k_normal();
      const float scale = outlier ? h->weight.outlier_scales[r]
                                  : h->weight.scales[r * s.n_groups() + j / s.group];
      const float orig = w[r * k + h->perm[j]];
      ASSERT_LE(std::fabs(deq[r * k + j] - orig), 0.5f * scale * 1.0001f) << r << "," << j;
    }
  }
}

// A Q8_0 matrix (the GGUF's tied embedding type) is read through DequantizeRow.
TEST(QuantizedHead, ReadsQuantizedStorage) {
  const int64_t rows = 40;
  const int k = 128;
  const size_t rb = *DTypeRowBytes(DType::kQ8_0, k);
  std::vector<BlockQ8_0> blocks(rows * k / 32);
  std::mt19937 rng(3);
  for (BlockQ8_0& b : blocks) {
    b.d = Fp32ToFp16(0.001f * static_cast<float>(1 + rng() % 8));
    for (int8_t& v : b.qs) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(blocks.data());
  const kernels::WeightMatrix m{DType::kQ8_0, rows, k, bytes, rb};
  absl::StatusOr<QuantizedHead> h = QuantizeOutputHead(m);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->weight.spec.n_outliers, 0);  // 128 / 8 = 16 -> 0 at a granule of 32
  EXPECT_EQ(h->weight.rows, rows);
  // Row 0, channel perm[0], dequantized from the blocks, within half a step.
  std::vector<float> row0(k);
  DequantizeRow(DType::kQ8_0, bytes, row0.data(), k);
  const std::vector<float> deq = kernels::quant::DequantizeWeight(h->weight.view());
  for (int j = 0; j < k; ++j) {
    const float scale = h->weight.scales[j / kHeadGroup];
    ASSERT_LE(std::fabs(deq[j] - row0[h->perm[j]]), 0.5f * scale * 1.0001f) << j;
  }
}

TEST(QuantizedHead, RefusesDegenerateMatrices) {
  const std::vector<float> w(32 * 8, 0.5f);
  const kernels::WeightMatrix narrow{DType::kF32, 8, 32, reinterpret_cast<const uint8_t*>(w.data()),
                                     32 * sizeof(float)};
  EXPECT_EQ(QuantizeOutputHead(narrow).status().code(), absl::StatusCode::kInvalidArgument);
  const kernels::WeightMatrix empty{DType::kF32, 0, 576, nullptr, 576 * sizeof(float)};
  EXPECT_EQ(QuantizeOutputHead(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
