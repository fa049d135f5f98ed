// CpuBackend: the optimised, multi-threaded CPU implementation of Backend.
// Kernels are chosen once at creation by cpuid (AVX-512 VNNI > AVX2+FMA+F16C > scalar).
// Work is split over output rows (MatMul), rows (norms), elements (SiLU) or
// (token, head) pairs (attention); every output element is computed entirely by one thread
// with a fixed operation sequence, so results are bitwise independent of the thread count,
// the batch composition and the row's position in the batch (backend.h contract).
// Results of different ISA levels may differ in the last bits for RmsNorm/SiluMul/
// attention (MatMul of AVX2 and AVX-512 VNNI is bitwise identical).
// A backend instance is not thread-safe: call it from one thread at a time.
#ifndef LOOM_KERNELS_CPU_CPU_BACKEND_H_
#define LOOM_KERNELS_CPU_CPU_BACKEND_H_

#include <memory>

#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/cpu_isa.h"

namespace loom::kernels {

// n_threads: total threads including the caller; 0 = all hardware threads.
std::unique_ptr<Backend> CreateCpuBackend(int n_threads);

// The same on a caller-owned pool (not owned; must outlive the backend). Share one pool
// between the backend and the LoRA kernels (CreateCpuLoraOps): two pools on the same cores
// make their spinning workers steal each other's time.
std::unique_ptr<Backend> CreateCpuBackendOnPool(ThreadPool* pool);

// The same with a forced ISA level (tests, benchmarks); nullptr if !CpuSupports(isa).
std::unique_ptr<Backend> CreateCpuBackendWithIsa(int n_threads, CpuIsa isa);

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_CPU_CPU_BACKEND_H_
