#include "kernels/cuda/cuda_ops.h"

#include <cuda_runtime_api.h>

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/ops_launch.h"

namespace loom::kernels::cuda {
namespace {

absl::Status CheckAttention(const char* op, const KvLayout& l, const AttentionBatch& b) {
  if (l.page_size < 1 || l.n_kv_heads < 1 || l.head_dim < 1 || b.n_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": bad layout or n_tokens"));
  }
  if (l.dtype != KvDtype::kF16) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": the CUDA KV cache holds FP16 rows only (int8/int4 caches run on the CPU)"));
  }
  if (b.n_tokens > 0 && (b.seq_of_token == nullptr || b.positions == nullptr ||
                         b.page_indptr == nullptr || b.page_table == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": null batch array"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SiluMul(const float* gate, const float* up, int64_t count, float* y,
                     CUstream_st* stream) {
  if (count < 0) return absl::InvalidArgumentError("SiluMul: negative count");
  if (count == 0) return absl::OkStatus();
  if (gate == nullptr || up == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("SiluMul: null pointer");
  }
  return CudaStatus(LaunchSiluMul(gate, up, count, y, stream), "SiluMul launch");
}

absl::Status Rope(float* x, const int32_t* positions, int n, int n_heads, int head_dim,
                  float theta, bool adjacent_pairs, CUstream_st* stream) {
  if (n < 0 || n_heads < 1 || head_dim < 2 || head_dim % 2 != 0 || !(theta > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("Rope: bad shape n=", n, " heads=", n_heads,
                                                   " head_dim=", head_dim, " theta=", theta));
  }
  if (n == 0) return absl::OkStatus();
  if (x == nullptr || positions == nullptr) return absl::InvalidArgumentError("Rope: null");
  return CudaStatus(
      LaunchRope(x, positions, n, n_heads, head_dim, theta, adjacent_pairs, stream),
      "Rope launch");
}

absl::Status AppendKv(const KvLayout& layout, const AttentionBatch& batch, const float* k,
                      const float* v, uint16_t* k_pool, uint16_t* v_pool, CUstream_st* stream) {
  if (absl::Status st = CheckAttention("AppendKv", layout, batch); !st.ok()) return st;
  if (batch.n_tokens == 0) return absl::OkStatus();
  if (k == nullptr || v == nullptr || k_pool == nullptr || v_pool == nullptr) {
    return absl::InvalidArgumentError("AppendKv: null pointer");
  }
  return CudaStatus(LaunchAppendKv(layout, batch, k, v, k_pool, v_pool, stream),
                    "AppendKv launch");
}

absl::Status PagedAttention(const KvLayout& layout, const AttentionBatch& batch,
                            const float* q, int n_heads, const uint16_t* k_pool,
                            const uint16_t* v_pool, float* out, CUstream_st* stream) {
  if (absl::Status st = CheckAttention("PagedAttention", layout, batch); !st.ok()) return st;
  if (layout.head_dim > kAttentionMaxHeadDim || n_heads < 1 ||
      n_heads % layout.n_kv_heads != 0 || n_heads > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: head_dim ",
                                                   layout.head_dim, " / n_heads ", n_heads,
                                                   " / n_kv_heads ", layout.n_kv_heads));
  }
  if (batch.n_tokens == 0) return absl::OkStatus();
  if (q == nullptr || k_pool == nullptr || v_pool == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("PagedAttention: null pointer");
  }
  return CudaStatus(
      LaunchPagedAttention(layout, batch, q, n_heads, k_pool, v_pool, out, stream),
      "PagedAttention launch");
}

absl::Status EmbeddingGather(DType dtype, const void* table, int64_t rows, int cols,
                             const int32_t* ids, int n, float* out, CUstream_st* stream) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 &&
      dtype != DType::kQ8_0) {
    return absl::UnimplementedError(
        absl::StrCat("EmbeddingGather: dtype ", std::string(DTypeName(dtype)), " not supported"));
  }
  const std::optional<size_t> row_bytes = DTypeRowBytes(dtype, cols);
  if (!row_bytes || rows < 0 || cols < 1 || n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmbeddingGather: bad shape rows=", rows, " cols=", cols, " n=", n));
  }
  if (n == 0) return absl::OkStatus();
  if (table == nullptr || ids == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("EmbeddingGather: null pointer");
  }
  return CudaStatus(
      LaunchEmbeddingGather(static_cast<int>(dtype), static_cast<const uint8_t*>(table), rows,
                            *row_bytes, cols, ids, n, out, stream),
      "EmbeddingGather launch");
}

}  // namespace loom::kernels::cuda
