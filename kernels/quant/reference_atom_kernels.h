// The scalar reference implementation of AtomKernels: the definition every optimised
// implementation is tested against.
//
// Canonical float combination (fixed order; the CPU kernels use exactly this sequence, so
// their results are bitwise equal to the reference):
//   acc = 0.0f
//   for g = 0 .. n_groups-1:  acc = fmaf(float(D[g]), sa[t,g] * sw[r,g], acc)
//   if n_outliers > 0:        acc = fmaf(float(Do), so[t] * swo[r], acc)
//   y[t, r] = acc
// (float(D) is exact: |D| <= group * 127 * 127 < 2^24 for group <= 1040.)
//
// Activation h of the fused kernels: RmsNormQuantize and SiluMulQuantize compute h exactly
// as ReferenceBackend::RmsNorm / SiluMul do (double arithmetic, kernels/cpu/
// reference_kernels.cc), then quantize it with QuantizeActivationRow.
#ifndef LOOM_KERNELS_QUANT_REFERENCE_ATOM_KERNELS_H_
#define LOOM_KERNELS_QUANT_REFERENCE_ATOM_KERNELS_H_

#include <cstdint>
#include <memory>

#include "kernels/quant/atom_format.h"

namespace loom::kernels::quant {

std::unique_ptr<AtomKernels> CreateReferenceAtomKernels();

// The integer part of y[t, r]: group_dots [w.spec.n_groups()] = D[t, r, g] and
// *outlier_dot = Do[t, r] (0 when there are no outliers).
void IntegerDots(const AtomWeightView& w, const AtomActivations& x, int t, int64_t r,
                 int32_t* group_dots, int32_t* outlier_dot);

// The canonical combination above for one output element.
float CombineDots(const AtomWeightView& w, const AtomActivations& x, int t, int64_t r,
                  const int32_t* group_dots, int32_t outlier_dot);

// Quantizes one permuted activation row xp [spec.k] with the header's rule:
// q [spec.k_normal_padded()] (padding zeroed), scales [spec.n_groups()],
// q_outlier [spec.n_outliers], *outlier_scale (left untouched when n_outliers == 0).
void QuantizeActivationRow(const float* xp, const QuantSpec& spec, int8_t* q, float* scales,
                           int8_t* q_outlier, float* outlier_scale);

// h [dim] as ReferenceBackend::RmsNorm computes one row (bitwise).
void ReferenceRmsNormRow(const float* x, const float* gamma, int dim, float eps, float* h);
// silu(g) * u as ReferenceBackend::SiluMul computes it (bitwise).
float ReferenceSiluMul(float g, float u);

}  // namespace loom::kernels::quant

#endif  // LOOM_KERNELS_QUANT_REFERENCE_ATOM_KERNELS_H_
