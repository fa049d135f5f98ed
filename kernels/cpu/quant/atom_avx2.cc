// AVX2 + FMA Atom kernels. Compiled with -mavx2 -mfma (see BUILD); only called after
// CpuSupports(CpuIsa::kAvx2).
#define LOOM_ATOM_VNNI 0
#include "kernels/cpu/quant/atom_x86.inc"

namespace loom::kernels::cpu::quant {
const AtomKernelTable* Avx2AtomKernels() { return &kTable; }
}  // namespace loom::kernels::cpu::quant
