#include "kernels/cpu/rotation/cpu_hadamard.h"

namespace loom::kernels {
namespace cpu_rotation {
void HadamardRowsScalar(const HadamardTransform& t, float* x, int64_t rows, bool transpose,
                        float* scratch);
void HadamardRowsAvx2(const HadamardTransform& t, float* x, int64_t rows, bool transpose,
                      float* scratch);
}  // namespace cpu_rotation

void CpuHadamardRows(const HadamardTransform& t, float* x, int64_t rows, bool transpose,
                     float* scratch, CpuIsa isa) {
  if (isa == CpuIsa::kScalar) {
    cpu_rotation::HadamardRowsScalar(t, x, rows, transpose, scratch);
  } else {  // AVX2 and AVX-512 VNNI machines: the AVX2 code
    cpu_rotation::HadamardRowsAvx2(t, x, rows, transpose, scratch);
  }
}

void CpuHadamardRows(const HadamardTransform& t, float* x, int64_t rows, bool transpose,
                     float* scratch) {
  static const CpuIsa isa = BestCpuIsa();
  CpuHadamardRows(t, x, rows, transpose, scratch, isa);
}

}  // namespace loom::kernels
