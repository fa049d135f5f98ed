// AVX-512 VNNI kernels: the AVX2 kernels with vpdpbusd (256-bit, AVX512VL) in place of
// maddubs+madd; results are bitwise identical to the AVX2 table. Compiled with AVX-512
// flags (see BUILD); only called after CpuSupports(CpuIsa::kAvx512Vnni).
#define LOOM_X86_VNNI 1
#include "kernels/cpu/kernels_x86.inc"

namespace loom::kernels::cpu {
const KernelTable* Avx512VnniKernels() { return &kTable; }
}  // namespace loom::kernels::cpu
