// Instruction-set levels of the CPU backend, chosen once per backend by cpuid.
#ifndef LOOM_KERNELS_CPU_CPU_ISA_H_
#define LOOM_KERNELS_CPU_CPU_ISA_H_

#include <string_view>

namespace loom::kernels {

// kAvx2 needs AVX2+FMA+F16C; kAvx512Vnni additionally AVX512F/VL/BW/VNNI.
enum class CpuIsa { kScalar, kAvx2, kAvx512Vnni };

// Whether this CPU (and OS) can run `isa`.
bool CpuSupports(CpuIsa isa);
// The best supported level.
CpuIsa BestCpuIsa();
std::string_view CpuIsaName(CpuIsa isa);

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_CPU_CPU_ISA_H_
