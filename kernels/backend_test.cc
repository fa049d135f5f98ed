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
    EXPECT_EQ(q[b].d, amax / 127.0f);
    int sum = 0, qmax = 0;
    for (int j = 0; j < 32; ++j) {
      const int qi = q[b].qs[j];
      sum += qi;
      qmax = std::max(qmax, std::abs(qi));
      // Round to nearest: error at most half a step (plus the rounding of 1/d).
      EXPECT_LE(std::fabs(x[b * 32 + j] - qi * q[b].d), 0.5f * q[b].d * (1 + 1e-5f));
    }
    EXPECT_EQ(qmax, 127);
    EXPECT_EQ(q[b].s, static_cast<float>(sum) * q[b].d);
  }
}

TEST(QuantizeRowQ8Test, TiesRoundAwayFromZeroAndZeroBlock) {
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
  EXPECT_EQ(q[0].qs[1], 3);
  EXPECT_EQ(q[0].qs[2], -3);
  EXPECT_EQ(q[0].qs[3], 1);
  EXPECT_EQ(q[0].qs[4], -1);
  EXPECT_EQ(q[0].qs[5], 3);
  EXPECT_EQ(q[0].s, 127.0f + 3 - 3 + 1 - 1 + 3);
  EXPECT_EQ(q[1].d, 0.0f);
  EXPECT_EQ(q[1].s, 0.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[1].qs[j], 0);
}

}  // namespace
}  // namespace loom::kernels
