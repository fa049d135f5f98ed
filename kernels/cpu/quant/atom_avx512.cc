// AVX-512 VNNI Atom kernels: the AVX2 kernels with vpdpbusd (256-bit, AVX512VL) for the
// integer dots; the integers are exact either way, so results are bitwise identical to the
// AVX2 table. Only called after CpuSupports(CpuIsa::kAvx512Vnni).
#define LOOM_ATOM_VNNI 1
#include "kernels/cpu/quant/atom_x86.inc"

namespace loom::kernels::cpu::quant {
const AtomKernelTable* Avx512VnniAtomKernels() { return &kTable; }
}  // namespace loom::kernels::cpu::quant
