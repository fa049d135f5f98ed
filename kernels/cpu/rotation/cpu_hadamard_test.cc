#include "kernels/cpu/rotation/cpu_hadamard.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace loom::kernels {
namespace {

// Bitwise equal to the reference (HadamardTransform::Apply) at every ISA level this CPU
// has, for the vector path (P >= 8) and the narrow-block path (P < 8).
TEST(CpuHadamardTest, BitwiseEqualToReferenceAtEveryIsa) {
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 3.0f);
  struct Case { int n, block; };
  const Case cases[] = {{1, 0},    {2, 0},    {4, 0},      {12, 0},   {24, 0},  {40, 0},
                        {8, 0},    {64, 0},   {36 * 8, 0}, {576, 0},  {1536, 0}, {4096, 0},
                        {28 * 32, 0}, {1472, 64}, {24, 8},  {24, 4},   {108, 36}};
  for (const Case& c : cases) {
    const int n = c.n;
    for (bool with_signs : {false, true}) {
      std::vector<float> signs;
      if (with_signs) signs = HadamardTransform::RandomSigns(n, 100 + n);
      const HadamardTransform t = *HadamardTransform::Create(n, signs, c.block);
      for (bool transpose : {false, true}) {
        const int rows = 5;
        std::vector<float> x(static_cast<size_t>(rows) * n);
        for (float& v : x) v = d(rng);
        x[3] = 1e4f;  // an outlier
        std::vector<float> want = x;
        t.Apply(want.data(), rows, transpose);
        for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
          if (!CpuSupports(isa)) continue;
          std::vector<float> got = x, scratch(n, 123.0f);
          CpuHadamardRows(t, got.data(), rows, transpose, scratch.data(), isa);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
              << "n " << n << " block " << c.block << " signs " << with_signs << " transpose " << transpose << " isa "
              << CpuIsaName(isa);
        }
      }
    }
  }
}

TEST(CpuHadamardTest, InPlaceRoundTrip) {
  const HadamardTransform t = *HadamardTransform::Create(576, HadamardTransform::RandomSigns(576, 1));
  std::vector<float> x(576), scratch(576);
  for (int i = 0; i < 576; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  std::vector<float> y = x;
  CpuHadamardRows(t, y.data(), 1, false, scratch.data());
  EXPECT_NE(y, x);
  CpuHadamardRows(t, y.data(), 1, true, scratch.data());
  for (int i = 0; i < 576; ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << i;
}

}  // namespace
}  // namespace loom::kernels
