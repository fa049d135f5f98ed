// GPTQ refinements (gptq.h): act order, static groups, the Hessian scale search and
// full-range 4-bit codes, each against RTN / plain GPTQ on a synthetic correlated problem.
#include "models/quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/weight_packing.h"
#include "models/quant/clip_search.h"
#include "models/quant/linear_quantizer.h"
#include "models/quant/scale_refit.h"

namespace loom::quant {
namespace {

using kernels::quant::AtomWeight;
using kernels::quant::QuantSpec;

QuantSpec Spec(int k, int outliers, int group) {
  QuantSpec s;
  s.k = k;
  s.n_outliers = outliers;
  s.group = group;
  s.w_bits = 4;
  s.a_bits = 8;
  return s;
}

// n tokens of k channels mixed from 16 sources (strongly correlated), with per-channel
// gains spread over two decades (so diag(H) orders the channels), and X^T X.
struct Problem {
  int k, n;
  std::vector<float> x;   // [n, k]
  std::vector<double> h;  // [k, k]
};

Problem MakeProblem(int k, int n, uint32_t seed) {
  Problem p{k, n, std::vector<float>(static_cast<size_t>(n) * k, 0.0f),
            std::vector<double>(static_cast<size_t>(k) * k, 0.0)};
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::uniform_real_distribution<float> gain(-1.0f, 1.0f);
  std::vector<float> z(n * 16), m(16 * k), gains(k);
  for (float& v : z) v = g(rng);
  for (float& v : m) v = g(rng);
  for (float& v : gains) v = std::pow(10.0f, gain(rng));
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      float v = 0.05f * g(rng);
      for (int a = 0; a < 16; ++a) v += z[t * 16 + a] * m[a * k + j] / 4;
      p.x[t * k + j] = gains[j] * v;
    }
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) p.h[i * k + j] += double{p.x[t * k + i]} * p.x[t * k + j];
  return p;
}

std::vector<float> Weights(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = 0.02f * t(rng);
  return v;
}

// Per-row output error (w_r - d_r)^T H (w_r - d_r).
std::vector<double> RowErrors(const Problem& p, const std::vector<float>& w, const AtomWeight& q) {
  const std::vector<float> wq = kernels::quant::DequantizeWeight(q.view());
  const int k = p.k;
  std::vector<double> out(q.rows, 0.0);
  for (int64_t r = 0; r < q.rows; ++r) {
    std::vector<double> d(k);
    for (int j = 0; j < k; ++j) d[j] = double{w[r * k + j]} - wq[r * k + j];
    for (int i = 0; i < k; ++i) {
      double a = 0;
      for (int j = 0; j < k; ++j) a += p.h[i * k + j] * d[j];
      out[r] += d[i] * a;
    }
  }
  return out;
}

// sum_r (w_r - wq_r)^T H (w_r - wq_r) = sum over tokens of ||x W^T - x Wq^T||^2.
double OutputError(const Problem& p, const std::vector<float>& w, const AtomWeight& q) {
  double err = 0;
  for (double e : RowErrors(p, w, q)) err += e;
  return err;
}

struct Setting {
  const GptqFactor* f = nullptr;
  bool static_groups = false, hessian = false, full_range = false;
  const double* refit_h = nullptr;  // refit_scales against this Hessian
  std::vector<float> ratios = ClipRatios({true, 0.5, 20});
};

AtomWeight Quantize(const std::vector<float>& w, int rows, const QuantSpec& s, const Setting& r) {
  LinearQuantInput in;
  in.w = w.data();
  in.rows = rows;
  in.spec = s;
  in.ratios = r.ratios;
  in.gptq = r.f;
  in.gptq_static_groups = r.static_groups;
  in.gptq_hessian_scale_search = r.hessian;
  in.full_range = r.full_range;
  in.refit_scales = r.refit_h != nullptr;
  in.hessian = r.refit_h;
  in.threads = 2;
  absl::StatusOr<AtomWeight> q = QuantizeLinear(in);
  EXPECT_TRUE(q.ok()) << q.status();
  return *std::move(q);
}

void ExpectSameWeights(const AtomWeight& a, const AtomWeight& b) {
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.q_outlier, b.q_outlier);
  EXPECT_EQ(a.outlier_scales, b.outlier_scales);
}

TEST(ActOrderTest, NormalColumnsByDescendingDiagThenOutliers) {
  const std::vector<double> diag = {1, 5, 3, 5, 0, 9, 2, 7};
  absl::StatusOr<std::vector<int>> o = ActOrder(diag, 3);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(*o, (std::vector<int>{1, 3, 2, 0, 4, 5, 6, 7}));  // ties keep ascending index
  EXPECT_EQ(*ActOrder(diag, 0), (std::vector<int>{5, 7, 1, 3, 2, 6, 0, 4}));
  EXPECT_FALSE(ActOrder(diag, 9).ok());
  EXPECT_FALSE(ActOrder(diag, -1).ok());
}

// The factor of a permuted sweep inverts P (H + damp I) P^T.
TEST(ActOrderTest, FactorInvertsThePermutedHessian) {
  const Problem p = MakeProblem(40, 300, 3);
  std::vector<double> diag(p.k);
  for (int j = 0; j < p.k; ++j) diag[j] = p.h[j * p.k + j];
  const std::vector<int> order = *ActOrder(diag, 8);
  absl::StatusOr<GptqFactor> f = PrepareGptq(p.h, p.k, 0.01, order);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->order, order);
  double mean = 0;
  for (int i = 0; i < p.k; ++i) mean += diag[i];
  mean /= p.k;
  const int k = p.k;
  for (int a = 0; a < k; ++a) {
    for (int b = 0; b < k; ++b) {
      double s = 0;
      for (int c = 0; c < k; ++c) {
        double inv_cb = 0;  // (U^T U)[c][b]
        for (int q = 0; q <= std::min(c, b); ++q) inv_cb += double{f->u[q * k + c]} * f->u[q * k + b];
        const double hp = p.h[order[a] * k + order[c]] + (a == c ? 0.01 * mean : 0.0);
        s += hp * inv_cb;
      }
      EXPECT_NEAR(s, a == b ? 1.0 : 0.0, 1e-3) << a << "," << b;
    }
  }
  EXPECT_FALSE(PrepareGptq(p.h, p.k, 0.01, {0, 1}).ok());
  std::vector<int> dup = order;
  dup[1] = dup[0];
  EXPECT_FALSE(PrepareGptq(p.h, p.k, 0.01, dup).ok());
}

// The identity order given explicitly is plain GPTQ, bit for bit.
TEST(ActOrderTest, NaturalOrderReproducesPlainGptq) {
  const Problem p = MakeProblem(96, 400, 5);
  const QuantSpec s = Spec(96, 32, 32);
  const int rows = 12;
  const std::vector<float> w = Weights(rows * s.k, 7);
  std::vector<int> identity(s.k);
  for (int j = 0; j < s.k; ++j) identity[j] = j;
  const GptqFactor plain = *PrepareGptq(p.h, s.k, 0.01);
  const GptqFactor natural = *PrepareGptq(p.h, s.k, 0.01, identity);
  EXPECT_EQ(plain.u, natural.u);
  for (bool full_range : {false, true}) {
    Setting a, b;
    a.f = &plain;
    b.f = &natural;
    a.full_range = b.full_range = full_range;
    ExpectSameWeights(Quantize(w, rows, s, a), Quantize(w, rows, s, b));
  }
}

// Act order (dynamic or static groups) cuts the output error well below RTN's, and on
// channels whose energies spread over decades it does better than plain GPTQ.
TEST(ActOrderTest, BeatsRtnAndPlainGptqOnSpreadChannels) {
  const Problem p = MakeProblem(128, 1024, 11);
  const int rows = 24;
  const std::vector<float> w = Weights(rows * p.k, 13);
  std::vector<double> diag(p.k);
  for (int j = 0; j < p.k; ++j) diag[j] = p.h[j * p.k + j];
  for (int outliers : {0, 32}) {
    const QuantSpec s = Spec(p.k, outliers, 32);
    const GptqFactor plain = *PrepareGptq(p.h, p.k, 0.01);
    const GptqFactor act = *PrepareGptq(p.h, p.k, 0.01, *ActOrder(diag, outliers));
    Setting rtn, gptq, act_dyn, act_static;
    gptq.f = &plain;
    act_dyn.f = act_static.f = &act;
    act_static.static_groups = true;
    const double e_rtn = OutputError(p, w, Quantize(w, rows, s, rtn));
    const double e_gptq = OutputError(p, w, Quantize(w, rows, s, gptq));
    const double e_dyn = OutputError(p, w, Quantize(w, rows, s, act_dyn));
    const double e_static = OutputError(p, w, Quantize(w, rows, s, act_static));
    EXPECT_LT(e_dyn, 0.7 * e_rtn) << outliers;
    EXPECT_LT(e_static, 0.7 * e_rtn) << outliers;
    EXPECT_LT(std::min(e_dyn, e_static), e_gptq) << outliers;
    std::printf("outliers %d: rtn %.4g gptq %.4g act-order %.4g act-order static %.4g\n",
                outliers, e_rtn, e_gptq, e_dyn, e_static);
  }
}

// With a single clip candidate the Hessian scale search has nothing to choose: plain
// GPTQ bit for bit.
TEST(HessianScaleSearchTest, DegenerateGridIsPlainGptq) {
  const Problem p = MakeProblem(128, 1024, 17);
  const int rows = 24;
  const std::vector<float> w = Weights(rows * p.k, 19);
  const QuantSpec s = Spec(p.k, 32, 32);
  const GptqFactor f = *PrepareGptq(p.h, p.k, 0.01);
  Setting plain1, hess1;
  plain1.f = hess1.f = &f;
  plain1.ratios = hess1.ratios = {1.0f};
  hess1.hessian = true;
  ExpectSameWeights(Quantize(w, rows, s, plain1), Quantize(w, rows, s, hess1));
}

// Over three problems x {0, 32} outliers, the ratio of output errors (Hessian scale search
// / plain GPTQ, same 20-point grid) has a geometric mean clearly below 1. It is greedy per
// group, so single cases may lose a little (measured: 0.68 .. 1.02, mean 0.87).
TEST(HessianScaleSearchTest, LowersOutputErrorOnAverage) {
  double log_ratio = 0;
  int cases = 0;
  for (uint32_t seed : {11u, 17u, 29u}) {
    const Problem p = MakeProblem(128, 1024, seed);
    const int rows = 24;
    const std::vector<float> w = Weights(rows * p.k, seed + 2);
    const GptqFactor f = *PrepareGptq(p.h, p.k, 0.01);
    for (int outliers : {0, 32}) {
      const QuantSpec s = Spec(p.k, outliers, 32);
      Setting plain, hess;
      plain.f = hess.f = &f;
      hess.hessian = true;
      const double e_plain = OutputError(p, w, Quantize(w, rows, s, plain));
      const double e_hess = OutputError(p, w, Quantize(w, rows, s, hess));
      std::printf("seed %u outliers %d: gptq %.4g + hessian scale search %.4g\n", seed,
                  outliers, e_plain, e_hess);
      log_ratio += std::log(e_hess / e_plain);
      ++cases;
    }
  }
  EXPECT_LT(std::exp(log_ratio / cases), 0.95);
}

// Full-range codes: only [-8, 7] comes out, -8 does occur, every group's weighted error
// is at most the symmetric grid's (its candidates include the symmetric ones, and each
// clamp to -8 is at least as close as -7), and the total is clearly lower.
TEST(FullRangeTest, NeverWorseThanSymmetricAndUsesMinusEight) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<double> energy(0.0, 4.0);
  const std::vector<float> grid = ClipRatios({true, 0.5, 20});
  const int n = 64;
  double total_sym = 0, total_full = 0;
  int minus8 = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> w = Weights(n, 300 + trial);
    std::vector<double> e(n);
    for (double& x : e) x = energy(rng);
    for (const std::vector<float>& ratios : {std::vector<float>{1.0f}, grid}) {
      std::vector<int8_t> qs(n), qf(n);
      const float ss = QuantizeGroupClipSearch(w.data(), e.data(), n, 4, ratios, qs.data());
      const float sf = QuantizeGroupClipSearch(w.data(), e.data(), n, 4, ratios, qf.data(), true);
      const double es = WeightedGroupError(w.data(), e.data(), n, qs.data(), ss);
      const double ef = WeightedGroupError(w.data(), e.data(), n, qf.data(), sf);
      EXPECT_LE(ef, es);
      for (int j = 0; j < n; ++j) {
        EXPECT_GE(qf[j], -8);
        EXPECT_LE(qf[j], 7);
        EXPECT_GE(qs[j], -7);
        minus8 += qf[j] == -8;
      }
      if (ratios.size() > 1) {
        total_sym += es;
        total_full += ef;
      }
    }
  }
  EXPECT_GT(minus8, 0);
  EXPECT_LT(total_full, 0.95 * total_sym);
  // 8-bit groups ignore the flag (the outlier and W8 grids stay symmetric).
  EXPECT_EQ(GridFor(8, true).qmin, -127);
  EXPECT_EQ(GridFor(4, true).qmin, -8);
  EXPECT_EQ(GridFor(4, false).qmin, -7);
}

// Full range through GPTQ: codes pack and unpack losslessly (DequantizeWeight reads -8
// back). With act order it lowers the output error below the symmetric grid's in every
// case here; with plain GPTQ it is NOT reliably better (measured 0.81 .. 1.48 of the
// symmetric error: the dynamic group scale leaves less headroom for the error that GPTQ
// pushes into the group's later columns), so that is not asserted.
TEST(FullRangeTest, GptqFullRangeRoundTripsAndHelpsWithActOrder) {
  for (uint32_t seed : {11u, 17u, 29u}) {
    const Problem p = MakeProblem(128, 1024, seed);
    const int rows = 24;
    const std::vector<float> w = Weights(rows * p.k, seed + 2);
    std::vector<double> diag(p.k);
    for (int j = 0; j < p.k; ++j) diag[j] = p.h[j * p.k + j];
    for (int outliers : {0, 32}) {
      const QuantSpec s = Spec(p.k, outliers, 32);
      const GptqFactor f = *PrepareGptq(p.h, p.k, 0.01, *ActOrder(diag, outliers));
      Setting sym, full;
      sym.f = full.f = &f;
      full.full_range = true;
      const AtomWeight qf = Quantize(w, rows, s, full);
      std::vector<int8_t> q(s.k_normal_padded());
      const std::vector<float> deq = kernels::quant::DequantizeWeight(qf.view());
      int minus8 = 0;
      for (int r = 0; r < rows; ++r) {
        kernels::quant::UnpackNormalRow(qf.q.data() + r * s.weight_row_bytes(), s, q.data());
        for (int j = 0; j < s.k_normal(); ++j) {
          minus8 += q[j] == -8;
          ASSERT_EQ(deq[r * s.k + j], q[j] * qf.scales[r * s.n_groups() + j / s.group]);
        }
      }
      EXPECT_GT(minus8, 0);
      const double e_sym = OutputError(p, w, Quantize(w, rows, s, sym));
      const double e_full = OutputError(p, w, qf);
      std::printf("seed %u outliers %d: act-order gptq symmetric %.4g full range %.4g\n", seed,
                  outliers, e_sym, e_full);
      EXPECT_LT(e_full, e_sym) << seed << " " << outliers;
    }
  }
}


// The least-squares scale refit keeps every code, never raises a row's output error, and
// lowers the total after RTN and after GPTQ (plain and full range).
TEST(ScaleRefitTest, KeepsCodesAndLowersEveryRowsError) {
  const Problem p = MakeProblem(128, 1024, 37);
  const int rows = 24;
  const std::vector<float> w = Weights(rows * p.k, 41);
  const GptqFactor f = *PrepareGptq(p.h, p.k, 0.01);
  for (int outliers : {0, 32}) {
    const QuantSpec s = Spec(p.k, outliers, 32);
    for (int method = 0; method < 3; ++method) {
      Setting base;
      if (method > 0) base.f = &f;
      base.full_range = method == 2;
      Setting refit = base;
      refit.refit_h = p.h.data();
      const AtomWeight a = Quantize(w, rows, s, base), b = Quantize(w, rows, s, refit);
      EXPECT_EQ(a.q, b.q);
      EXPECT_EQ(a.q_outlier, b.q_outlier);
      const std::vector<double> ea = RowErrors(p, w, a), eb = RowErrors(p, w, b);
      double ta = 0, tb = 0;
      for (int r = 0; r < rows; ++r) {
        EXPECT_LE(eb[r], ea[r] * (1 + 1e-9)) << "row " << r;
        ta += ea[r];
        tb += eb[r];
      }
      for (float sc : b.scales) EXPECT_GE(sc, 0.0f);
      std::printf("outliers %d method %d: error %.4g -> refit %.4g\n", outliers, method, ta, tb);
      EXPECT_LT(tb, 0.99 * ta);
    }
  }
}

// A row that its codes represent exactly (w = q * s per group) keeps its scales.
TEST(ScaleRefitTest, ExactRowIsAFixedPoint) {
  const Problem p = MakeProblem(64, 256, 43);
  const QuantSpec s = Spec(64, 16, 16);
  std::vector<int8_t> q(s.k_normal_padded()), qo(16);
  std::vector<float> scales = {0.01f, 0.02f, 0.005f}, w(64);
  float os = 0.001f;
  std::mt19937 rng(3);
  for (int j = 0; j < 48; ++j) {
    q[j] = static_cast<int8_t>(static_cast<int>(rng() % 15) - 7);
    w[j] = q[j] * scales[j / 16];
  }
  for (int j = 0; j < 16; ++j) {
    qo[j] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    w[48 + j] = qo[j] * os;
  }
  const std::vector<float> before = scales;
  RefitRowScales(w.data(), p.h.data(), s, q.data(), qo.data(), scales.data(), &os);
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(scales[a], before[a], 1e-6f * before[a]);
  EXPECT_NEAR(os, 0.001f, 1e-9f);
}

}  // namespace
}  // namespace loom::quant
