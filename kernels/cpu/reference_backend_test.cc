// Checks ReferenceBackend against independent derivations (dequantized float dots,
// closed-form values), so that it can serve as the oracle for the optimised backends.
#include "kernels/cpu/reference_backend.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"

namespace loom::kernels {
namespace {

using testing::RandomFloats;
using testing::RandomMatrix;

// MatMul == sum_j DequantizeRow(W)[j] * x'[j] where x' is the activation as the kernel
// sees it: q * d for quantized weights (dequantized Q8), x itself for float weights.
TEST(ReferenceBackendTest, MatMulMatchesDequantizedDot) {
  auto be = CreateReferenceBackend();
  const int rows = 19, cols = 96, n = 3;
  for (DType t : testing::kAllDTypes) {
    auto m = RandomMatrix(t, rows, cols, 11);
    const auto x = RandomFloats(n * cols, 12);
    ActivationPack pack;
    be->PackActivations(t, x.data(), n, cols, &pack);
    ASSERT_EQ(pack.quantized, DTypeIsQuantized(t));
    std::vector<float> y(n * rows);
    be->MatMul(m.w, pack, y.data());
    std::vector<float> wrow(cols), xd(cols);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < cols; ++j) {
        xd[j] = pack.quantized ? pack.q8[i * cols / 32 + j / 32].qs[j % 32] *
                                     pack.q8[i * cols / 32 + j / 32].d
                               : x[i * cols + j];
      }
      for (int r = 0; r < rows; ++r) {
        DequantizeRow(t, m.w.data + r * m.w.row_bytes, wrow.data(), cols);
        double want = 0, scale = 0;
        for (int j = 0; j < cols; ++j) {
          want += static_cast<double>(wrow[j]) * xd[j];
          scale += std::fabs(static_cast<double>(wrow[j]) * xd[j]);
        }
        EXPECT_NEAR(y[i * rows + r], want, 1e-5 * scale + 1e-30)
            << DTypeName(t) << " i=" << i << " r=" << r;
      }
    }
  }
}

TEST(ReferenceBackendTest, RmsNormOfConstantRow) {
  auto be = CreateReferenceBackend();
  std::vector<float> x(8, 3.0f), g = {1, 2, 3, 4, 5, 6, 7, 8}, y(8);
  be->RmsNorm(x.data(), g.data(), 1, 8, 1e-5f, y.data());
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], 3.0 / std::sqrt(9.0 + 1e-5) * g[i], 1e-6);
}

TEST(ReferenceBackendTest, SiluMulKnownValues) {
  auto be = CreateReferenceBackend();
  const std::vector<float> g = {0.0f, 1.0f, -1.0f, 20.0f}, u = {5.0f, 2.0f, 1.0f, 1.0f};
  std::vector<float> y(4);
  be->SiluMul(g.data(), u.data(), 4, y.data());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 2 * 0.7310585786300049, 1e-6);
  EXPECT_NEAR(y[2], -0.2689414213699951, 1e-6);
  EXPECT_NEAR(y[3], 20.0, 1e-5);
}

TEST(ReferenceBackendTest, RopeRotatesPairsByPositionTimesFrequency) {
  auto be = CreateReferenceBackend();
  const int d = 4;
  const float theta = 100.0f;
  // Pair i rotates by pos * theta^(-2i/d): pair 0 by pos, pair 1 by pos / 10.
  for (bool adjacent : {true, false}) {
    std::vector<float> x = {1, 0, 0, 1};  // adjacent: pairs (1,0),(0,1); HF: (1,0),(0,1)
    const int32_t pos = 3;
    be->Rope(x.data(), &pos, 1, 1, d, theta, adjacent);
    const double a0 = 3.0, a1 = 0.3;
    if (adjacent) {
      EXPECT_NEAR(x[0], std::cos(a0), 1e-6);
      EXPECT_NEAR(x[1], std::sin(a0), 1e-6);
      EXPECT_NEAR(x[2], -std::sin(a1), 1e-6);
      EXPECT_NEAR(x[3], std::cos(a1), 1e-6);
    } else {  // pairs (0,2) = (1,0) and (1,3) = (0,1)
      EXPECT_NEAR(x[0], std::cos(a0), 1e-6);
      EXPECT_NEAR(x[2], std::sin(a0), 1e-6);
      EXPECT_NEAR(x[1], -std::sin(a1), 1e-6);
      EXPECT_NEAR(x[3], std::cos(a1), 1e-6);
    }
  }
}

// One sequence in two non-adjacent pages. Equal keys -> uniform weights -> the output is
// the mean of the (FP16-rounded) values; a single position returns its value.
TEST(ReferenceBackendTest, AttentionWithEqualKeysAveragesValues) {
  auto be = CreateReferenceBackend();
  KvLayout l{2, 1, 8};
  std::vector<uint8_t> kp(4 * l.page_bytes()), vp(4 * l.page_bytes());
  const int32_t indptr[] = {0, 2};
  const int32_t table[] = {3, 1};
  const int n = 3;
  const int32_t seq[] = {0, 0, 0}, pos[] = {0, 1, 2};
  AttentionBatch b{n, seq, pos, indptr, table};
  std::vector<float> k(n * 8, 0.25f), v = RandomFloats(n * 8, 5);
  be->AppendKv(l, b, k.data(), v.data(), kp.data(), vp.data());
  uint16_t stored;  // pos 1 -> page 3 slot 1, element 2
  std::memcpy(&stored, vp.data() + 3 * l.page_bytes() + (1 * 8 + 2) * 2, 2);
  EXPECT_EQ(stored, Fp32ToFp16(v[1 * 8 + 2]));
  const auto q = RandomFloats(n * 8, 6);
  std::vector<float> out(n * 8);
  be->PagedAttention(l, b, q.data(), 1, kp.data(), vp.data(), out.data());
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < 8; ++i) {
      double mean = 0;
      for (int p = 0; p <= t; ++p) mean += Fp16ToFp32(Fp32ToFp16(v[p * 8 + i]));
      EXPECT_NEAR(out[t * 8 + i], mean / (t + 1), 1e-6);
    }
  }
}

}  // namespace
}  // namespace loom::kernels
