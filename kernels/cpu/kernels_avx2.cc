// AVX2 + FMA + F16C kernels. Compiled with -mavx2 -mfma -mf16c (see BUILD); only called
// after CpuSupports(CpuIsa::kAvx2).
#define LOOM_X86_VNNI 0
#include "kernels/cpu/kernels_x86.inc"

namespace loom::kernels::cpu {
const KernelTable* Avx2Kernels() { return &kTable; }
}  // namespace loom::kernels::cpu
