// Internal to CpuAtomKernels: per-ISA kernel tables and the per-call MatMul plan.
//
// Every table computes each output element with the canonical sequence of
// kernels/quant/reference_atom_kernels.h: exact int32 group dots D[g] and outlier dot Do,
// then acc = fma(float(D[g]), sa * sw, acc) over g in order, then acc = fma(float(Do),
// so * swo, acc). Integer sums are exact whatever the instruction mix and float lanes are
// independent IEEE operations, so the scalar, AVX2 and AVX-512 VNNI tables agree bitwise
// with each other and with the reference, whatever the tile shape, n or thread count.
#ifndef LOOM_KERNELS_CPU_QUANT_ATOM_CPU_KERNELS_H_
#define LOOM_KERNELS_CPU_QUANT_ATOM_CPU_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant/row_block_weight.h"
#include "kernels/quant/atom_format.h"

namespace loom::kernels::cpu::quant {

using kernels::quant::AtomWeightView;
using kernels::quant::QuantSpec;

// Token padding granule when n > 1 (tiles of 8 tokens, then 4; n == 1 uses one-token
// tiles).
inline constexpr int kTokenTile = 4;

// Activations rearranged once per MatMul call (by the driver) for the vector tiles.
// n_pad = 1 when n == 1, else n rounded up to kTokenTile; padded tokens are all zero.
struct MatMulPlan {
  int n = 0;                  // real tokens
  int n_pad = 0;
  int k_normal_padded = 0;    // = spec.k_normal_padded()
  int n_groups = 0;           // = spec.n_groups()
  int group = 0;
  int n_outliers = 0;
  int outliers_padded = 0;    // n_outliers rounded up to 32
  int w_bits = 0;
  int a_bits = 0;
  size_t w_row_bytes = 0;     // = spec.weight_row_bytes()
  const int8_t* xq = nullptr;        // [n_pad, k_normal_padded]
  const float* scales_t = nullptr;   // [n_groups, n_pad]: sa transposed
  const int32_t* corr_t = nullptr;   // [n_groups, n_pad]: 8 * sum of the group's qa (4-bit w)
  const int8_t* xo = nullptr;        // [n_pad, outliers_padded], zero padded
  const float* outlier_scales = nullptr;  // [n_pad]
};

struct AtomKernelTable {
  const char* name;
  // Whether matmul handles this spec (else the driver uses the scalar table's).
  bool (*supports)(const QuantSpec& spec);
  // y[t * ys + r] for weight rows r in [r0, r1) and tokens t < plan.n.
  void (*matmul)(const MatMulPlan& plan, const AtomWeightView& w, int64_t r0, int64_t r1,
                 float* y, int64_t ys);
  // As matmul, from the row-block layout (row_block_weight.h) of a spec `supports` takes;
  // nullptr when the table has no row-block tiles (the driver then uses `matmul`).
  void (*matmul_row_blocks)(const MatMulPlan& plan, const RowBlockView& w, int64_t r0,
                            int64_t r1, float* y, int64_t ys);
  // One permuted row xp [spec.k] -> q [k_normal_padded], scales [n_groups],
  // q_outlier [n_outliers], *outlier_scale (the header's rule, bitwise).
  void (*quantize_row)(const float* xp, const QuantSpec& spec, int8_t* q, float* scales,
                       int8_t* q_outlier, float* outlier_scale);
  // As the CpuBackend of the same ISA computes RmsNorm of one row / SiluMul (bitwise).
  void (*rmsnorm_row)(const float* x, const float* gamma, int dim, float eps, float* y);
  void (*silu_mul)(const float* g, const float* u, int64_t count, float* y);
  // sums[g] = sum of q[g * group .. (g + 1) * group) for g < n_groups (int8 values).
  void (*group_sums)(const int8_t* q, int n_groups, int group, int32_t* sums);
};

const AtomKernelTable* ScalarAtomKernels();
const AtomKernelTable* Avx2AtomKernels();
const AtomKernelTable* Avx512VnniAtomKernels();

}  // namespace loom::kernels::cpu::quant

#endif  // LOOM_KERNELS_CPU_QUANT_ATOM_CPU_KERNELS_H_
