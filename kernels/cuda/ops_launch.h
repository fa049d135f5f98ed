// Raw launchers of the per-token model kernels (ops.cu): SiLU*mul, rope, paged KV append,
// paged attention (batched prefill + decode, CSR page table, GQA, FP16 KV), embedding
// gather. Shared by nvcc and gcc code; callers outside kernels/cuda use cuda_ops.h.
// Every pointer is a DEVICE pointer, including the AttentionBatch arrays.
#ifndef LOOM_KERNELS_CUDA_OPS_LAUNCH_H_
#define LOOM_KERNELS_CUDA_OPS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"

namespace loom::kernels::cuda {

inline constexpr int kAttentionMaxHeadDim = 256;

// y[i] = silu(gate[i]) * up[i] (double, rounded to float: ReferenceBackend's formula).
cudaError_t LaunchSiluMul(const float* gate, const float* up, int64_t count, float* y,
                          cudaStream_t stream);

// Backend::Rope: angles in double (theta^(-2i/head_dim) * pos), cos/sin rounded to float.
cudaError_t LaunchRope(float* x, const int32_t* positions, int n, int n_heads, int head_dim,
                       float theta, bool adjacent_pairs, cudaStream_t stream);

// Backend::AppendKv (FP32 -> FP16, round to nearest even).
cudaError_t LaunchAppendKv(const KvLayout& layout, const AttentionBatch& batch, const float* k,
                           const float* v, uint16_t* k_pool, uint16_t* v_pool,
                           cudaStream_t stream);

// Backend::PagedAttention: one 128-thread block per (token, head); each warp walks every
// 4th position with an online softmax (FP32), the 4 partial states are merged at the end.
// REQUIRES head_dim <= kAttentionMaxHeadDim, n_heads % n_kv_heads == 0.
cudaError_t LaunchPagedAttention(const KvLayout& layout, const AttentionBatch& batch,
                                 const float* q, int n_heads, const uint16_t* k_pool,
                                 const uint16_t* v_pool, float* out, cudaStream_t stream);

// out[t, :] = row ids[t] of `table` dequantized to FP32 (dtype kF32, kF16, kBF16 or kQ8_0;
// rows of `row_bytes` bytes, `cols` values). ids outside [0, rows) give a zero row.
cudaError_t LaunchEmbeddingGather(int dtype, const uint8_t* table, int64_t rows,
                                  size_t row_bytes, int cols, const int32_t* ids, int n,
                                  float* out, cudaStream_t stream);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_OPS_LAUNCH_H_
