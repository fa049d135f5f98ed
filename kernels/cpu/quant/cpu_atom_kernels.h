// CpuAtomKernels: the optimised, multi-threaded CPU implementation of AtomKernels
// (kernels/quant/atom_format.h). Kernels are chosen once at creation by cpuid (AVX-512
// VNNI > AVX2+FMA > scalar), like CpuBackend. MatMul splits output rows over the pool; in
// each chunk, register tiles of 1 weight row x 8 tokens (x 4 for the last tokens; 8 rows
// x 1 token at n == 1) unpack INT4 weights to INT8 lanes in registers and form exact
// int32 group dots, rescaled per group in FP32, then the INT8 outlier block. Supported
// vector shapes: group % 64 == 0 (4-bit weights) or % 32 == 0 (8-bit), group <= 1024;
// other groups run the scalar kernel (same results).
//
// Results: bitwise equal to CreateReferenceAtomKernels() for Quantize and MatMul (same
// integers, same canonical float order), and bitwise independent of n, the row's position
// and the thread count (backend.h's batch-invariance contract). RmsNormQuantize and
// SiluMulQuantize compute h bitwise as CpuBackend of the same ISA (CreateCpuBackend picks
// the same one), so on AVX2 h may differ from ReferenceBackend's in the last bits.
// Not thread-safe: call from one thread at a time (it owns per-call workspaces).
#ifndef LOOM_KERNELS_CPU_QUANT_CPU_ATOM_KERNELS_H_
#define LOOM_KERNELS_CPU_QUANT_CPU_ATOM_KERNELS_H_

#include <memory>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/quant/atom_format.h"

namespace loom::kernels::quant {

// pool: not owned, must outlive the kernels (share CpuBackend's pool).
std::unique_ptr<AtomKernels> CreateCpuAtomKernels(ThreadPool* pool);

// The same with a forced ISA level (tests, benchmarks); nullptr if !CpuSupports(isa).
std::unique_ptr<AtomKernels> CreateCpuAtomKernelsWithIsa(ThreadPool* pool, CpuIsa isa);

}  // namespace loom::kernels::quant

#endif  // LOOM_KERNELS_CPU_QUANT_CPU_ATOM_KERNELS_H_
