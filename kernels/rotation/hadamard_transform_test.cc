#include "kernels/rotation/hadamard_transform.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/rotation/hadamard_matrix.h"

namespace loom::kernels {
namespace {

std::vector<float> RandomRows(int64_t rows, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(rows * n);
  for (float& v : x) v = d(rng);
  // One large channel per row: the outlier a rotation exists to spread.
  for (int64_t r = 0; r < rows; ++r) x[r * n + (r * 7) % n] *= 40.0f;
  return x;
}

TEST(HadamardMatrixTest, EveryBuiltOrderIsHadamard) {
  std::vector<int> orders = HadamardBaseOrders();
  for (int p : {1, 2, 4, 64}) orders.push_back(p);
  for (int n : orders) {
    absl::StatusOr<std::vector<int8_t>> h = HadamardMatrix(n);
    ASSERT_TRUE(h.ok()) << n << ": " << h.status();
    ASSERT_EQ(h->size(), static_cast<size_t>(n) * n);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        const int8_t v = (*h)[static_cast<size_t>(i) * n + j];
        ASSERT_TRUE(v == 1 || v == -1) << n << " [" << i << "][" << j << "] = " << int(v);
        int dot = 0;
        for (int c = 0; c < n; ++c) {
          dot += (*h)[static_cast<size_t>(i) * n + c] * (*h)[static_cast<size_t>(j) * n + c];
        }
        ASSERT_EQ(dot, i == j ? n : 0) << "order " << n << " rows " << i << ", " << j;
      }
    }
  }
}

TEST(HadamardMatrixTest, DecomposesSmolLmWidthsAndRefusesOthers) {
  EXPECT_EQ(*HadamardBaseOrder(576), 36);
  EXPECT_EQ(*HadamardBaseOrder(1536), 12);
  EXPECT_EQ(*HadamardBaseOrder(4096), 1);
  EXPECT_EQ(*HadamardBaseOrder(14336), 28);
  for (int n : {9, 11008, 3, 6 * 9}) {
    absl::StatusOr<int> k = HadamardBaseOrder(n);
    EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << n;
  }
  EXPECT_EQ(HadamardMatrix(9).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(HadamardTransform::Create(9).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(HadamardTransformTest, DenseMatrixIsOrthogonal) {
  for (int n : {12, 64, 576}) {
    absl::StatusOr<HadamardTransform> t =
        HadamardTransform::Create(n, HadamardTransform::RandomSigns(n, 5));
    ASSERT_TRUE(t.ok()) << t.status();
    const std::vector<double> m = t->Dense();
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        double dot = 0;
        for (int c = 0; c < n; ++c) dot += m[static_cast<size_t>(i) * n + c] * m[static_cast<size_t>(j) * n + c];
        ASSERT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-12) << n << " " << i << " " << j;
      }
    }
  }
}

// The transform against the plain product with its explicit orthogonal matrix.
TEST(HadamardTransformTest, ApplyEqualsMatrixProduct) {
  for (int n : {1, 2, 8, 12, 24, 20 * 8, 64, 36 * 4, 576, 1536}) {
    for (bool with_signs : {false, true}) {
      std::vector<float> signs;
      if (with_signs) signs = HadamardTransform::RandomSigns(n, 11 + n);
      absl::StatusOr<HadamardTransform> t = HadamardTransform::Create(n, signs);
      ASSERT_TRUE(t.ok()) << t.status();
      for (bool transpose : {false, true}) {
        const int rows = 3;
        std::vector<float> x = RandomRows(rows, n, 17 + n);
        std::vector<float> y = x;
        t->Apply(y.data(), rows, transpose);
        const std::vector<double> m = t->Dense(transpose);
        for (int r = 0; r < rows; ++r) {
          double norm = 0;
          for (int j = 0; j < n; ++j) norm += double(x[r * n + j]) * x[r * n + j];
          for (int i = 0; i < n; ++i) {
            double want = 0;
            for (int j = 0; j < n; ++j) want += m[static_cast<size_t>(i) * n + j] * x[r * n + j];
            ASSERT_NEAR(y[r * n + i], want, 2e-6 * std::sqrt(norm) + 1e-30)
                << "n " << n << " signs " << with_signs << " transpose " << transpose
                << " row " << r << " element " << i;
          }
        }
      }
    }
  }
}

// Block-diagonal transforms (widths without a Hadamard matrix) against the explicit matrix.
TEST(HadamardTransformTest, BlockedTransformsEqualTheirMatrix) {
  struct Case { int n, block; };
  for (Case c : {Case{1472, 64}, Case{24, 8}, Case{24, 4}, Case{36 * 3, 36}}) {
    SCOPED_TRACE(::testing::Message() << c.n << " in blocks of " << c.block);
    absl::StatusOr<HadamardTransform> t =
        HadamardTransform::Create(c.n, HadamardTransform::RandomSigns(c.n, 2), c.block);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->blocks(), c.n / c.block);
    for (bool transpose : {false, true}) {
      std::vector<float> x = RandomRows(2, c.n, 4), y = x;
      t->Apply(y.data(), 2, transpose);
      const std::vector<double> m = t->Dense(transpose);
      for (int r = 0; r < 2; ++r) {
        for (int i = 0; i < c.n; ++i) {
          double want = 0;
          for (int j = 0; j < c.n; ++j) want += m[static_cast<size_t>(i) * c.n + j] * x[r * c.n + j];
          ASSERT_NEAR(y[r * c.n + i], want, 1e-4) << i;
        }
      }
    }
    // Still orthogonal.
    const std::vector<double> m = t->Dense();
    for (int i = 0; i < c.n; i += 7) {
      double dot = 0;
      for (int j = 0; j < c.n; ++j) dot += m[static_cast<size_t>(i) * c.n + j] * m[static_cast<size_t>(i) * c.n + j];
      ASSERT_NEAR(dot, 1.0, 1e-12);
    }
  }
  EXPECT_EQ(HadamardTransform::Create(100, {}, 64).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HadamardTransform::Create(90, {}, 45).status().code(), absl::StatusCode::kUnimplemented);
  // Full when the width has a matrix, else the largest power-of-two block.
  EXPECT_EQ(HadamardTransform::CreateFullOrBlocked(576)->blocks(), 1);
  EXPECT_EQ(HadamardTransform::CreateFullOrBlocked(1472)->blocks(), 23);
  EXPECT_EQ(HadamardTransform::CreateFullOrBlocked(1472)->base() *
                HadamardTransform::CreateFullOrBlocked(1472)->block(), 64);
  EXPECT_EQ(HadamardTransform::CreateFullOrBlocked(9 * 7).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_NE(HadamardTransform::Create(1472, {}, 64)->Fingerprint(),
            HadamardTransform::Create(1472, {}, 32)->Fingerprint());
}

TEST(HadamardTransformTest, TransposeUndoesForwardAndSpreadsAnOutlier) {
  const int n = 1536;
  absl::StatusOr<HadamardTransform> t = HadamardTransform::Create(n, HadamardTransform::RandomSigns(n, 3));
  ASSERT_TRUE(t.ok());
  std::vector<float> x(n, 0.0f);
  x[100] = 1000.0f;
  std::vector<float> y = x;
  t->Apply(y.data(), 1);
  // One channel of magnitude 1000 becomes n channels of magnitude 1000 / sqrt(n).
  for (int i = 0; i < n; ++i) ASSERT_NEAR(std::fabs(y[i]), 1000.0 / std::sqrt(n), 1e-3);
  t->Apply(y.data(), 1, /*transpose=*/true);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-3) << i;
}

TEST(HadamardTransformTest, RefusesBadSigns) {
  EXPECT_EQ(HadamardTransform::Create(12, std::vector<float>(11, 1.0f)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> s(12, 1.0f);
  s[3] = 0.5f;
  EXPECT_EQ(HadamardTransform::Create(12, s).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HadamardTransform::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HadamardTransformTest, SignsAreDeterministicAndFingerprintsTellTransformsApart) {
  const std::vector<float> a = HadamardTransform::RandomSigns(576, 42);
  EXPECT_EQ(a, HadamardTransform::RandomSigns(576, 42));
  const std::vector<float> b = HadamardTransform::RandomSigns(576, 43);
  EXPECT_NE(a, b);
  int negative = 0;
  for (float v : a) negative += v < 0;
  EXPECT_GT(negative, 576 / 4);
  EXPECT_LT(negative, 3 * 576 / 4);
  const HadamardTransform ta = *HadamardTransform::Create(576, a);
  EXPECT_EQ(ta.Fingerprint(), HadamardTransform::Create(576, a)->Fingerprint());
  EXPECT_NE(ta.Fingerprint(), HadamardTransform::Create(576, b)->Fingerprint());
  EXPECT_NE(ta.Fingerprint(), HadamardTransform::Create(576)->Fingerprint());
  EXPECT_NE(HadamardTransform::Create(64)->Fingerprint(),
            HadamardTransform::Create(128)->Fingerprint());
}

}  // namespace
}  // namespace loom::kernels
