#include "kernels/backend.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace loom::kernels {
namespace {

TEST(QuantizeRowQ8Test, BoundsScaleAndSum) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(32 * 8);
  for (float& v : x) v = u(rng);
  std::vector<BlockQ8Act> q(8);
  QuantizeRowQ8(x.data(), static_cast<int>(x.size()), q.data());
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    // d is stored as FP16 (ggml's block_q8_1).
    EXPECT_EQ(q[b].d, Fp16ToFp32(Fp32ToFp16(amax / 127.0f)));
    int sum = 0, qmax = 0;
    for (int j = 0; j < 32; ++j) {
      const int qi = q[b].qs[j];
      sum += qi;
      qmax = std::max(qmax, std::abs(qi));
      // Round to nearest: error at most half a step of the exact d, plus |q| times the
      // FP16 rounding error of the stored d.
      const float d = amax / 127.0f;
      EXPECT_LE(std::fabs(x[b * 32 + j] - qi * q[b].d),
                0.5f * d + 127.0f * std::fabs(q[b].d - d) + 1e-6f * d);
    }
    EXPECT_EQ(qmax, 127);
    EXPECT_EQ(q[b].s, Fp16ToFp32(Fp32ToFp16(static_cast<float>(sum) * (amax / 127.0f))));
  }
}

// ggml-cpu's x86 quantize_row_q8_1 rounds with _MM_ROUND_NEAREST: ties go to even.
TEST(QuantizeRowQ8Test, TiesRoundToEvenAndZeroBlock) {
  // amax = 127 -> d = 1, 1/d = 1: x = k + 0.5 are exact ties.
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = 3.49f;
  std::vector<BlockQ8Act> q(2);
  QuantizeRowQ8(x.data(), 64, q.data());
  EXPECT_EQ(q[0].d, 1.0f);
  EXPECT_EQ(q[0].qs[1], 2);
  EXPECT_EQ(q[0].qs[2], -2);
  EXPECT_EQ(q[0].qs[3], 0);
  EXPECT_EQ(q[0].qs[4], 0);
  EXPECT_EQ(q[0].qs[5], 3);
  EXPECT_EQ(q[0].s, 127.0f + 2 - 2 + 0 - 0 + 3);
  EXPECT_EQ(q[1].d, 0.0f);
  EXPECT_EQ(q[1].s, 0.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[1].qs[j], 0);
}

}  // namespace
}  // namespace loom::kernels
