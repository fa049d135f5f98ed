// Scalar Atom kernels (any CPU, and shapes the vector tables do not handle): the
// reference's arithmetic, one weight row unpacked at a time.
#include <cmath>
#include <vector>

#include "kernels/cpu/quant/atom_cpu_kernels.h"
#include "kernels/quant/reference_atom_kernels.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::cpu::quant {
namespace {

namespace kq = kernels::quant;

bool Supports(const QuantSpec&) { return true; }

void MatMul(const MatMulPlan& p, const AtomWeightView& w, int64_t r0, int64_t r1, float* y,
            int64_t ys) {
  thread_local std::vector<int8_t> wq;
  const int kp = p.k_normal_padded, ng = p.n_groups, no = p.n_outliers;
  if (wq.size() < static_cast<size_t>(kp)) wq.resize(kp);
  for (int64_t r = r0; r < r1; ++r) {
    kq::UnpackNormalRow(w.q + r * static_cast<int64_t>(p.w_row_bytes), w.spec, wq.data());
    const int8_t* wo = no > 0 ? w.q_outlier + r * no : nullptr;
    for (int t = 0; t < p.n; ++t) {
      const int8_t* xq = p.xq + static_cast<int64_t>(t) * kp;
      float acc = 0.0f;
      for (int g = 0; g < ng; ++g) {
        int32_t d = 0;
        for (int j = g * p.group; j < (g + 1) * p.group; ++j) d += int32_t{wq[j]} * xq[j];
        const float scale = p.scales_t[static_cast<size_t>(g) * p.n_pad + t] * w.scales[r * ng + g];
        acc = std::fmaf(static_cast<float>(d), scale, acc);
      }
      if (no > 0) {
        const int8_t* xo = p.xo + static_cast<int64_t>(t) * p.outliers_padded;
        int32_t d = 0;
        for (int j = 0; j < no; ++j) d += int32_t{wo[j]} * xo[j];
        acc = std::fmaf(static_cast<float>(d), p.outlier_scales[t] * w.outlier_scales[r], acc);
      }
      y[t * ys + r] = acc;
    }
  }
}

void SiluMul(const float* g, const float* u, int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = kq::ReferenceSiluMul(g[i], u[i]);
}

void GroupSums(const int8_t* q, int n_groups, int group, int32_t* sums) {
  for (int g = 0; g < n_groups; ++g) {
    int32_t s = 0;
    for (int j = 0; j < group; ++j) s += q[static_cast<size_t>(g) * group + j];
    sums[g] = s;
  }
}

const AtomKernelTable kScalarTable = {
    "scalar", Supports, MatMul, nullptr, kq::QuantizeActivationRow, kq::ReferenceRmsNormRow,
    SiluMul,  GroupSums,
};

}  // namespace

const AtomKernelTable* ScalarAtomKernels() { return &kScalarTable; }

}  // namespace loom::kernels::cpu::quant
