// CpuLoraOps: multi-adapter LoRA (SGMV shrink/expand, BGMV; kernels/lora_ops.h) on the CPU.
//
// * Shrink: work items are (segment, block of 8 rank rows, chunk of <= 32 tokens); an item
//   reads its rows of A once for all the chunk's tokens (tiles of 2 tokens x 4 rows, or 1
//   token x 8 rows, accumulating in registers). Expand: items are (segment, block of h_out
//   rows of ~16 KiB of B, chunk of tokens); each 8-row slice of B is transposed to FP32
//   columns once and reused for every token of the chunk (vectorised over outputs, no
//   horizontal sums); the scale is fused (y = fma(scale, dot, y)). Mixed ranks in one call,
//   no padding; segments without an adapter cost nothing. Each item prefetches the next
//   item's weights while it computes (adapters are usually cold in DRAM).
// * Batch invariance: every v[t, r] and y[t, o] is one canonical dot (lora_kernels.h)
//   computed by one thread, so results are bitwise independent of the segmentation, the
//   other tokens, the thread count and the ISA (scalar == AVX2); Bgmv runs the same kernels
//   and agrees bitwise with SgmvShrink + SgmvExpand.
// * Segments that break the interface's REQUIRES (rank <= 0, rank > v_stride, null
//   weights, begin >= end) are skipped: their v / y rows are left untouched.
// * An instance keeps small work lists (grown, never shrunk); calls on one instance are
//   serialised by a mutex. The pool is not owned and may be shared with the backend
//   (ThreadPool::ParallelFor serialises its callers), but must not be called from inside a
//   ParallelFor of the same pool (not reentrant); nullptr = single-threaded.
#ifndef LOOM_KERNELS_CPU_SGMV_CPU_LORA_OPS_H_
#define LOOM_KERNELS_CPU_SGMV_CPU_LORA_OPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/lora_ops.h"

namespace loom::kernels {

enum class LoraIsa { kAuto, kScalar, kAvx2 };

// The best kernels this CPU supports (AVX2+FMA, else scalar).
std::unique_ptr<LoraOps> CreateCpuLoraOps(ThreadPool* pool);

// A forced ISA (tests, benchmarks); FailedPrecondition if the CPU lacks it.
absl::StatusOr<std::unique_ptr<LoraOps>> CreateCpuLoraOpsWithIsa(ThreadPool* pool, LoraIsa isa);

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_CPU_SGMV_CPU_LORA_OPS_H_
