#include "kernels/cpu/quant/cpu_atom_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/quant/atom_test_util.h"
#include "kernels/quant/reference_atom_kernels.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::quant {
namespace {

using testing::RandomPerm;
using testing::RandomValues;

struct Bits { int w, a; };
constexpr Bits kBits[] = {{4, 4}, {4, 8}, {8, 8}};
constexpr int kKs[] = {200, 576, 1000, 1536};
constexpr int kOutliers[] = {0, 64, 128};
constexpr int kNs[] = {1, 3, 8, 33};
constexpr int kRows = 37;  // odd and not a multiple of 8: every tile remainder runs

std::vector<CpuIsa> Isas() {
  std::vector<CpuIsa> v;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (CpuSupports(isa)) v.push_back(isa);
  }
  return v;
}

// RTN weights plus extreme values the quantizer never emits but the format allows
// (nibble 0 = -8 for 4 bits, -128 for 8 bits), so the integer paths see the full range.
AtomWeight MakeWeight(const QuantSpec& s, int64_t rows, uint32_t seed) {
  std::vector<float> wf = RandomValues(static_cast<size_t>(rows) * s.k, seed, 0.05f);
  AtomWeight w = *QuantizeWeightRTN(wf.data(), rows, s);
  std::mt19937 rng(seed + 1);
  for (size_t i = 0; i < w.q.size(); i += 1 + rng() % 13) {
    if (s.w_bits == 4) {
      w.q[i] = static_cast<uint8_t>(w.q[i] & 0xF0);  // low nibble -> -8
    } else {
      w.q[i] = 0x80;  // -128
    }
  }
  for (size_t i = 0; i < w.q_outlier.size(); i += 1 + rng() % 11) w.q_outlier[i] = -128;
  return w;
}

// Activations with 30x channels (the kind Atom moves to the end) and a few exact zeros.
std::vector<float> MakeX(int n, int k, uint32_t seed) {
  std::vector<float> x = RandomValues(static_cast<size_t>(n) * k, seed, 1.0f, k, 23);
  for (size_t i = 0; i < x.size(); i += 41) x[i] = 0.0f;
  return x;
}

void ExpectSameActivations(const AtomActivations& a, const AtomActivations& b) {
  const QuantSpec& s = a.spec;
  ASSERT_TRUE(a.spec == b.spec);
  ASSERT_EQ(a.n, b.n);
  const size_t n = a.n;
  for (size_t i = 0; i < n * s.k_normal_padded(); ++i) ASSERT_EQ(a.q[i], b.q[i]) << i;
  for (size_t i = 0; i < n * s.n_groups(); ++i) ASSERT_EQ(a.scales[i], b.scales[i]) << i;
  for (size_t i = 0; i < n * s.n_outliers; ++i) ASSERT_EQ(a.q_outlier[i], b.q_outlier[i]) << i;
  if (s.n_outliers > 0) {
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a.outlier_scales[i], b.outlier_scales[i]) << i;
  }
}

void ExpectBitwise(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << i << ": " << a[i] << " vs " << b[i];
  }
}

// Quantize and MatMul equal the reference bitwise over the whole shape grid, for every
// ISA and 1 or 2 threads; the quantization also equals the header's rule written
// independently.
TEST(CpuAtomKernels, QuantizeAndMatMulEqualReferenceOverShapeGrid) {
  auto ref = CreateReferenceAtomKernels();
  ThreadPool pool1(1), pool2(2);
  for (CpuIsa isa : Isas()) {
    for (ThreadPool* pool : {&pool1, &pool2}) {
      auto cpu = CreateCpuAtomKernelsWithIsa(pool, isa);
      ASSERT_NE(cpu, nullptr);
      for (int group : {128, 64, 32}) {
      for (int k : kKs) {
        for (int no : kOutliers) {
          for (Bits b : kBits) {
            const QuantSpec s{k, no, group, b.w, b.a};
            const AtomWeight w = MakeWeight(s, kRows, k + no + b.w);
            const std::unique_ptr<PreparedAtomWeight> prepared = cpu->Prepare(w.view());
            ASSERT_EQ(prepared != nullptr, isa != CpuIsa::kScalar);
            AtomWeightView wp = w.view();
            wp.prepared = prepared.get();
            const std::vector<int32_t> perm = RandomPerm(k, k);
            for (int n : kNs) {
              SCOPED_TRACE(std::string(cpu->name()) + " threads " + std::to_string(pool->size()) +
                           " group " + std::to_string(group) +
                           " k " + std::to_string(k) + " outliers " + std::to_string(no) +
                           " w" + std::to_string(b.w) + "a" + std::to_string(b.a) + " n " +
                           std::to_string(n));
              const std::vector<float> x = MakeX(n, k, n * 7 + k);
              AtomActivations xr, xc;
              std::vector<float> pr(x.size()), pc(x.size());
              ref->Quantize(x.data(), n, perm.data(), s, &xr, pr.data());
              cpu->Quantize(x.data(), n, perm.data(), s, &xc, pc.data());
              ExpectBitwise(pr, pc);
              ExpectSameActivations(xr, xc);
              for (int t = 0; t < n; ++t) {
                const auto e = testing::ExpectedQuantization(pc.data() + t * k, s);
                for (int j = 0; j < s.k_normal_padded(); ++j) {
                  ASSERT_EQ(xc.q[t * s.k_normal_padded() + j], e.q[j]);
                }
              }
              std::vector<float> yr(static_cast<size_t>(n) * kRows), yc(yr.size());
              ref->MatMul(w.view(), xr, yr.data());
              cpu->MatMul(w.view(), xc, yc.data());
              ExpectBitwise(yr, yc);
              std::fill(yc.begin(), yc.end(), -1.0f);
              cpu->MatMul(wp, xc, yc.data());  // the row-block tiles
              ExpectBitwise(yr, yc);
            }
          }
        }
      }
      }
    }
  }
}

// The integer part alone: with weight and activation scales of 1 on one group (0
// elsewhere) y is exactly float(D[g]), and likewise float(Do) for the outlier block.
TEST(CpuAtomKernels, IntegerPartsEqualReferenceExactly) {
  ThreadPool pool(2);
  for (CpuIsa isa : Isas()) {
    auto cpu = CreateCpuAtomKernelsWithIsa(&pool, isa);
    for (Bits b : kBits) {
      for (int n : {1, 5}) {
        const QuantSpec s{1000, 64, 128, b.w, b.a};
        SCOPED_TRACE(std::string(cpu->name()) + " w" + std::to_string(b.w) + "a" +
                     std::to_string(b.a) + " n " + std::to_string(n));
        AtomWeight w = MakeWeight(s, kRows, 3);
        const std::vector<float> x = MakeX(n, s.k, 4);
        AtomActivations a;
        cpu->Quantize(x.data(), n, nullptr, s, &a, nullptr);
        std::fill(a.scales.begin(), a.scales.end(), 1.0f);
        std::fill(a.outlier_scales.begin(), a.outlier_scales.end(), 1.0f);
        std::vector<int32_t> d(s.n_groups());
        std::vector<float> y(static_cast<size_t>(n) * kRows);
        for (int g = 0; g <= s.n_groups(); ++g) {  // g == n_groups: the outlier block
          for (int64_t r = 0; r < kRows; ++r) {
            for (int j = 0; j < s.n_groups(); ++j) w.scales[r * s.n_groups() + j] = j == g ? 1.0f : 0.0f;
            w.outlier_scales[r] = g == s.n_groups() ? 1.0f : 0.0f;
          }
          const std::unique_ptr<PreparedAtomWeight> prepared = cpu->Prepare(w.view());
          AtomWeightView wp = w.view();
          wp.prepared = prepared.get();
          for (const AtomWeightView& view : {w.view(), wp}) {
            cpu->MatMul(view, a, y.data());
            for (int t = 0; t < n; ++t) {
              for (int64_t r = 0; r < kRows; ++r) {
                int32_t dout = 0;
                IntegerDots(w.view(), a, t, r, d.data(), &dout);
                const int32_t want = g < s.n_groups() ? d[g] : dout;
                ASSERT_EQ(y[t * kRows + r], static_cast<float>(want))
                    << "g " << g << " t " << t << " r " << r << " prepared " << (view.prepared != nullptr);
              }
            }
          }
        }
      }
    }
  }
}

// MatMulMany (q/k/v-shaped: 576, 192 and 37 rows on one activation) equals MatMul of each
// weight bitwise, whatever ISA, thread count and n; a weight of another spec gets NaNs
// and leaves the others' results alone.
TEST(CpuAtomKernels, MatMulManyEqualsEachMatMul) {
  ThreadPool pool1(1), pool2(2);
  const QuantSpec s{576, 64, 128, 4, 4};
  const AtomWeight wq = MakeWeight(s, 576, 11), wk = MakeWeight(s, 192, 12),
                   wv = MakeWeight(s, kRows, 13);
  const AtomWeight other = MakeWeight(QuantSpec{576, 64, 64, 4, 4}, 64, 14);
  for (CpuIsa isa : Isas()) {
    for (ThreadPool* pool : {&pool1, &pool2}) {
      auto cpu = CreateCpuAtomKernelsWithIsa(pool, isa);
      for (int n : {1, 8, 33}) {
        SCOPED_TRACE(std::string(cpu->name()) + " threads " + std::to_string(pool->size()) +
                     " n " + std::to_string(n));
        const std::vector<float> x = MakeX(n, s.k, 15 + n);
        AtomActivations a;
        cpu->Quantize(x.data(), n, nullptr, s, &a, nullptr);
        std::vector<AtomWeightView> views = {wq.view(), wk.view(), wv.view()};
        std::vector<std::vector<float>> each(3), many(3);
        for (int i = 0; i < 3; ++i) {
          each[i].resize(static_cast<size_t>(n) * views[i].rows);
          many[i].assign(each[i].size(), -1.0f);
          cpu->MatMul(views[i], a, each[i].data());
        }
        const AtomWeightView* ws[3] = {&views[0], &views[1], &views[2]};
        float* ys[3] = {many[0].data(), many[1].data(), many[2].data()};
        cpu->MatMulMany(ws, 3, a, ys);
        for (int i = 0; i < 3; ++i) ExpectBitwise(each[i], many[i]);
        // Prepared (row blocks; 37 rows: the chunks straddle blocks and weights).
        std::vector<std::unique_ptr<PreparedAtomWeight>> prepared;
        std::vector<AtomWeightView> pviews = views;
        for (AtomWeightView& v : pviews) {
          prepared.push_back(cpu->Prepare(v));
          v.prepared = prepared.back().get();
        }
        const AtomWeightView* pws[3] = {&pviews[0], &pviews[1], &pviews[2]};
        for (int i = 0; i < 3; ++i) many[i].assign(each[i].size(), -1.0f);
        cpu->MatMulMany(pws, 3, a, ys);
        for (int i = 0; i < 3; ++i) ExpectBitwise(each[i], many[i]);

        const AtomWeightView ov = other.view();
        const AtomWeightView* mixed[2] = {&ov, &views[1]};
        std::vector<float> yo(static_cast<size_t>(n) * ov.rows), yk(each[1].size());
        float* ym[2] = {yo.data(), yk.data()};
        cpu->MatMulMany(mixed, 2, a, ym);
        for (float v : yo) ASSERT_TRUE(std::isnan(v));
        ExpectBitwise(each[1], yk);
      }
    }
  }
}

// n rows at once == each row alone (any position), for 1 and 2 threads.
TEST(CpuAtomKernels, BatchInvariant) {
  ThreadPool pool1(1), pool2(2);
  const QuantSpec s{576, 64, 128, 4, 4};
  const AtomWeight w = MakeWeight(s, 1536, 9);
  const int n = 33;
  const std::vector<float> x = MakeX(n, s.k, 10);
  for (CpuIsa isa : Isas()) {
    auto c1 = CreateCpuAtomKernelsWithIsa(&pool1, isa);
    auto c2 = CreateCpuAtomKernelsWithIsa(&pool2, isa);
    AtomActivations a;
    c2->Quantize(x.data(), n, nullptr, s, &a, nullptr);
    std::vector<float> all2(static_cast<size_t>(n) * w.rows), all1(all2.size());
    c2->MatMul(w.view(), a, all2.data());
    c1->MatMul(w.view(), a, all1.data());
    ExpectBitwise(all1, all2);
    std::vector<float> one(w.rows);
    AtomActivations a1;
    for (int t = 0; t < n; ++t) {
      c2->Quantize(x.data() + t * s.k, 1, nullptr, s, &a1, nullptr);
      c2->MatMul(w.view(), a1, one.data());
      ExpectBitwise(one, std::vector<float>(all2.begin() + t * w.rows, all2.begin() + (t + 1) * w.rows));
    }
    // A sub-batch starting at token 5 (different tile positions).
    AtomActivations a3;
    c2->Quantize(x.data() + 5 * s.k, 3, nullptr, s, &a3, nullptr);
    std::vector<float> three(3 * w.rows);
    c2->MatMul(w.view(), a3, three.data());
    ExpectBitwise(three, std::vector<float>(all2.begin() + 5 * w.rows, all2.begin() + 8 * w.rows));
  }
}

// h of the fused kernels is what CpuBackend of the same ISA computes, bitwise; the
// quantization of h equals the reference's.
TEST(CpuAtomKernels, FusedKernelsMatchCpuBackendOfSameIsa) {
  ThreadPool pool(2);
  auto ref = CreateReferenceAtomKernels();
  for (CpuIsa isa : Isas()) {
    auto cpu = CreateCpuAtomKernelsWithIsa(&pool, isa);
    auto be = CreateCpuBackendWithIsa(1, isa);
    for (int k : {200, 576, 1536}) {
      for (int n : {1, 3, 33}) {
        const QuantSpec s{k, 64, 128, 4, 4};
        SCOPED_TRACE(std::string(cpu->name()) + " k " + std::to_string(k) + " n " + std::to_string(n));
        const size_t count = static_cast<size_t>(n) * k;
        const std::vector<float> x = MakeX(n, k, 1 + k);
        const std::vector<float> gamma = RandomValues(k, 2, 1.5f);
        const std::vector<float> up = RandomValues(count, 3, 2.0f);
        const std::vector<int32_t> perm = RandomPerm(k, 4);
        std::vector<float> h(count), hp(count), got(count);
        AtomActivations a, want;
        be->RmsNorm(x.data(), gamma.data(), n, k, 1e-5f, h.data());
        PermuteColumns(h.data(), n, k, perm.data(), hp.data());
        cpu->RmsNormQuantize(x.data(), gamma.data(), n, 1e-5f, perm.data(), s, &a, got.data());
        ExpectBitwise(got, hp);
        ref->Quantize(hp.data(), n, nullptr, s, &want, nullptr);
        ExpectSameActivations(a, want);
        // normed == nullptr and perm == nullptr paths give the same quantization.
        AtomActivations a2;
        cpu->RmsNormQuantize(x.data(), gamma.data(), n, 1e-5f, nullptr, s, &a2, nullptr);
        ref->Quantize(h.data(), n, nullptr, s, &want, nullptr);
        ExpectSameActivations(a2, want);

        be->SiluMul(x.data(), up.data(), static_cast<int64_t>(count), h.data());
        cpu->SiluMulQuantize(x.data(), up.data(), n, s, &a, got.data());
        ExpectBitwise(got, h);
        ref->Quantize(h.data(), n, nullptr, s, &want, nullptr);
        ExpectSameActivations(a, want);
      }
    }
  }
}

// The online-rotation kernels (reorder, then rotate the normal channels): HadamardQuantize
// equals the reference bitwise;
// SiluMulHadamardQuantize equals the reference rotation + quantization of the CPU's own
// SiLU*mul (bitwise as CpuBackend of the same ISA); HadamardRows equals
// HadamardTransform::Apply. SmolLM2's widths (576 = 36 x 16, 1536 = 12 x 128) and a power
// of two, with and without signs, outliers and permutation, 1 to 33 rows.
TEST(CpuAtomKernels, RotationKernelsEqualReference) {
  ThreadPool pool(2);
  auto ref = CreateReferenceAtomKernels();
  for (CpuIsa isa : Isas()) {
    auto cpu = CreateCpuAtomKernelsWithIsa(&pool, isa);
    for (int k : {576, 1536, 512}) {
      for (int outliers : {0, 64}) {
        for (int n : {1, 3, 33}) {
          const QuantSpec s{k, outliers, 64, 4, 4};
          SCOPED_TRACE(std::string(cpu->name()) + " k " + std::to_string(k) + " outliers " +
                       std::to_string(outliers) + " n " + std::to_string(n));
          // Over the normal channels (blocked where k - outliers has no Hadamard matrix).
          const HadamardTransform t = *HadamardTransform::CreateFullOrBlocked(
              k - outliers,
              outliers > 0 ? HadamardTransform::RandomSigns(k - outliers, 7) : std::vector<float>());
          const size_t count = static_cast<size_t>(n) * k;
          const std::vector<float> x = MakeX(n, k, 5 + k);
          const std::vector<float> up = RandomValues(count, 6, 2.0f);
          const std::vector<int32_t> perm = RandomPerm(k, 8);
          const int32_t* p = outliers > 0 ? perm.data() : nullptr;
          std::vector<float> got(count), want_r(count);
          AtomActivations a, want;
          cpu->HadamardQuantize(x.data(), n, t, p, s, &a, got.data());
          ref->HadamardQuantize(x.data(), n, t, p, s, &want, want_r.data());
          ExpectBitwise(got, want_r);
          ExpectSameActivations(a, want);
          AtomActivations a2;
          cpu->HadamardQuantize(x.data(), n, t, p, s, &a2, nullptr);
          ExpectSameActivations(a2, want);

          std::vector<float> h(count);
          AtomActivations unused;
          cpu->SiluMulQuantize(x.data(), up.data(), n, {k, 0, 64, 8, 8}, &unused, h.data());
          cpu->SiluMulHadamardQuantize(x.data(), up.data(), n, t, p, s, &a, got.data());
          ref->HadamardQuantize(h.data(), n, t, p, s, &want, want_r.data());
          ExpectBitwise(got, want_r);
          ExpectSameActivations(a, want);

          const HadamardTransform full =
              *HadamardTransform::Create(k, HadamardTransform::RandomSigns(k, 9));
          for (bool transpose : {false, true}) {
            std::vector<float> y = x, y_ref = x;
            cpu->HadamardRows(full, y.data(), n, transpose);
            full.Apply(y_ref.data(), n, transpose);
            ExpectBitwise(y, y_ref);
          }
        }
      }
    }
  }
}

// Groups the vector tiles do not take (4-bit: not 32 and group % 64 != 0) use the scalar table;
// outlier counts that are not a multiple of 32 and layers with no normal channels work.
TEST(CpuAtomKernels, OddShapesStillMatch) {
  ThreadPool pool(2);
  auto ref = CreateReferenceAtomKernels();
  auto cpu = CreateCpuAtomKernels(&pool);
  for (Bits b : kBits) {
    for (QuantSpec s : {QuantSpec{300, 20, 96, b.w, b.a}, QuantSpec{300, 20, 128, b.w, b.a},
                        QuantSpec{64, 64, 128, b.w, b.a}}) {
      SCOPED_TRACE("k " + std::to_string(s.k) + " group " + std::to_string(s.group) + " w" +
                   std::to_string(b.w) + "a" + std::to_string(b.a));
      const AtomWeight w = MakeWeight(s, kRows, 5);
      const std::vector<float> x = MakeX(6, s.k, 6);
      AtomActivations xr, xc;
      ref->Quantize(x.data(), 6, nullptr, s, &xr, nullptr);
      cpu->Quantize(x.data(), 6, nullptr, s, &xc, nullptr);
      ExpectSameActivations(xr, xc);
      std::vector<float> yr(6 * kRows), yc(yr.size());
      ref->MatMul(w.view(), xr, yr.data());
      cpu->MatMul(w.view(), xc, yc.data());
      ExpectBitwise(yr, yc);
    }
  }
}

TEST(CpuAtomKernels, MismatchedSpecGivesNaNAndBadIsaGivesNull) {
  ThreadPool pool(1);
  auto cpu = CreateCpuAtomKernels(&pool);
  ASSERT_NE(cpu, nullptr);
  const QuantSpec s{128, 0, 128, 4, 4};
  const AtomWeight w = MakeWeight(s, 3, 1);
  QuantSpec other = s;
  other.a_bits = 8;
  const std::vector<float> x = MakeX(2, 128, 2);
  AtomActivations a;
  cpu->Quantize(x.data(), 2, nullptr, other, &a, nullptr);
  std::vector<float> y(6, 0.0f);
  cpu->MatMul(w.view(), a, y.data());
  for (float v : y) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(CreateCpuAtomKernelsWithIsa(nullptr, CpuIsa::kScalar), nullptr);
  if (!CpuSupports(CpuIsa::kAvx512Vnni)) {
    EXPECT_EQ(CreateCpuAtomKernelsWithIsa(&pool, CpuIsa::kAvx512Vnni), nullptr);
  }
}

}  // namespace
}  // namespace loom::kernels::quant
