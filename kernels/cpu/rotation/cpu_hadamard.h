// The Hadamard transform of kernels/rotation/hadamard_transform.h on the CPU: the same
// canonical float sequence as HadamardTransform::Apply (so bitwise its results), with the
// butterflies and the cross-block sums in 8-lane vectors (AVX2 where the CPU has it; the
// scalar level runs the same vector code as SSE pairs). Blocks narrower than 8 values
// (P < 8) run the sequence one value at a time.
#ifndef LOOM_KERNELS_CPU_ROTATION_CPU_HADAMARD_H_
#define LOOM_KERNELS_CPU_ROTATION_CPU_HADAMARD_H_

#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/rotation/hadamard_transform.h"

namespace loom::kernels {

// Every row of x [rows, t.n()] <- T x (transpose: Tᵀ x), in place. `scratch` [t.n()]
// floats (any contents; clobbered). Single-threaded; `isa` must be supported.
// (Multiplying by signs ±1 is exact, so the order of sign and vector steps is free.)
void CpuHadamardRows(const HadamardTransform& t, float* x, int64_t rows, bool transpose,
                     float* scratch, CpuIsa isa);

// The same on the best ISA of this CPU.
void CpuHadamardRows(const HadamardTransform& t, float* x, int64_t rows, bool transpose,
                     float* scratch);

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_CPU_ROTATION_CPU_HADAMARD_H_
