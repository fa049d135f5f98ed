// Least-squares refit of one quantized row's scales with its integer codes fixed.
//
// After the codes q are chosen (RTN, clip search or GPTQ), the row's dequantized value is
// d = sum_a s_a v_a, where v_a holds the codes of normal group a (zeros elsewhere) or of
// the outlier block, and s_a its scale. The Hessian-weighted output error
// (w - d)^T H (w - d) = ||X w - X d||^2 is a convex quadratic in s: the minimiser solves
// A s = b with A_ab = v_a^T H v_b and b_a = v_a^T H w. The codes and the format do not
// change; only the float scales move, so the error can only go down (the old scales are a
// feasible point) and any change is checked against that.
#ifndef LOOM_MODELS_QUANT_SCALE_REFIT_H_
#define LOOM_MODELS_QUANT_SCALE_REFIT_H_

#include <cstdint>

#include "kernels/quant/atom_format.h"

namespace loom::quant {

// w [spec.k]: the row before quantization (permuted order); h [spec.k, spec.k]: X^T X in
// the same order; q [spec.k_normal_padded()] normal codes; q_outlier [spec.n_outliers]
// (nullable when none). Replaces scales [spec.n_groups()] and *outlier_scale (nullable
// when no outliers) by the least-squares optimum when it is finite, >= 0 everywhere and
// lowers the error; otherwise leaves them. Returns true when it replaced them.
bool RefitRowScales(const float* w, const double* h, const kernels::quant::QuantSpec& spec,
                    const int8_t* q, const int8_t* q_outlier, float* scales,
                    float* outlier_scale);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_SCALE_REFIT_H_
