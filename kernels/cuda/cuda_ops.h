// Per-token model kernels on a CUDA device, with the contracts of the same-named
// kernels::Backend methods (kernels/backend.h). Public header: no CUDA headers.
// Every pointer is a DEVICE pointer — the tensors and the AttentionBatch's index arrays
// (seq_of_token, positions, page_indptr, page_table). Calls queue work on `stream`
// (nullptr: default) and never synchronise; argument errors are checked on the host
// before any launch (InvalidArgument), launch errors come back as Status, errors during
// execution surface at the next synchronisation.
//
// Numerics vs the CPU ReferenceBackend: AppendKv and EmbeddingGather are bitwise equal;
// SiluMul and Rope compute the same double formulas (cos/sin/exp/pow of the device's
// libm: equal up to a last-bit difference); PagedAttention uses an FP32 online softmax
// (the reference: double, two-pass), within ~1e-5 relative.
#ifndef LOOM_KERNELS_CUDA_CUDA_OPS_H_
#define LOOM_KERNELS_CUDA_CUDA_OPS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "kernels/dtype.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace loom::kernels::cuda {

absl::Status SiluMul(const float* gate, const float* up, int64_t count, float* y,
                     CUstream_st* stream = nullptr);

absl::Status Rope(float* x, const int32_t* positions, int n, int n_heads, int head_dim,
                  float theta, bool adjacent_pairs, CUstream_st* stream = nullptr);

absl::Status AppendKv(const KvLayout& layout, const AttentionBatch& batch, const float* k,
                      const float* v, uint16_t* k_pool, uint16_t* v_pool,
                      CUstream_st* stream = nullptr);

// Batched prefill and decode alike: every token attends to positions 0..positions[t] of
// its sequence. REQUIRES head_dim <= 256 and n_heads % n_kv_heads == 0 (else
// InvalidArgument).
absl::Status PagedAttention(const KvLayout& layout, const AttentionBatch& batch,
                            const float* q, int n_heads, const uint16_t* k_pool,
                            const uint16_t* v_pool, float* out, CUstream_st* stream = nullptr);

// out [n, cols] FP32 = rows ids[t] of `table` (dtype kF32 / kF16 / kBF16 / kQ8_0, rows of
// DTypeRowBytes(dtype, cols) bytes). An id outside [0, rows) gives a zero row.
absl::Status EmbeddingGather(DType dtype, const void* table, int64_t rows, int cols,
                             const int32_t* ids, int n, float* out,
                             CUstream_st* stream = nullptr);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_CUDA_OPS_H_
