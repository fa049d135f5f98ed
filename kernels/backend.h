// The only interface that knows about devices. Everything above it (models/, scheduler/)
// talks in raw tensor pointers with documented shapes, a per-step plan, and caller-owned
// workspaces; no allocation happens inside a kernel call.
//
// Batch invariance contract (every CPU backend): each output row depends only on its own
// input row(s) and the weights, computed in a fixed reduction order — bitwise identical
// whatever the number of rows in the call, the row's position in the batch, or the thread
// count. MatMul over n rows and n MatMuls over one row agree bitwise.
#ifndef LOOM_KERNELS_BACKEND_H_
#define LOOM_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"

namespace loom::kernels {

// A weight matrix W [rows = out, cols = in] in its stored type; row r starts at
// data + r * row_bytes. cols is a multiple of 32 for quantized types.
struct WeightMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
};

// Activations in 8-bit blocks (ggml's Q8_1 layout, with FP32 scales): for each 32-element
// block, q[j] = round(x[j] / d) with d = absmax / 127, and s = d * sum(q).
struct BlockQ8Act {
  float d;
  float s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8Act) == 40);

// x [n, k] prepared for MatMul against one weight dtype. Quantized weight types read
// `q8` (n * k/32 blocks, row-major); float weight types read `f32` (n * k floats).
// The buffers are owned by the pack and reused across calls (grown, never shrunk).
struct ActivationPack {
  int n = 0;
  int k = 0;
  bool quantized = false;
  std::vector<BlockQ8Act> q8;
  std::vector<float> f32;
};

// Quantizes (or copies) one row of k floats into q8 blocks. Shared by every backend so
// that all of them see the same integer activations. REQUIRES: k % 32 == 0.
void QuantizeRowQ8(const float* x, int k, BlockQ8Act* out);

// Element type of the paged KV cache. Every row (one token, one kv head: head_dim values)
// is stored on its own, so rows can be written in any order:
//   kF16:  head_dim x FP16.                                       2 * head_dim bytes
//   kInt8: FP16 scale d, then head_dim x int8 q;  x = d * q       2 + head_dim bytes
//          (symmetric: d = absmax / 127, q in [-127, 127]).
//   kInt4: FP16 scale d, FP16 minimum m, then head_dim / 2 bytes; x = d * q + m
//          (asymmetric: d = (max - min) / 15, q in [0, 15]). Byte i holds element i in its
//          low nibble and element i + head_dim / 2 in its high nibble. head_dim even.
// Quantized rows of a power-of-two head_dim hold the head vector ROTATED by the normalized
// Walsh-Hadamard transform H (H = Hᵀ = H⁻¹; QuaRot's trick): rotation spreads the few
// large channels of K (and V) over all of them, so one scale per row fits every channel.
// Attention is unchanged by it: q·k = (Hq)·(Hk) and Σ p v = H Σ p (Hv). Other head_dims
// are stored unrotated. The quantized rows are written by QuantizeKvRow (kv_quant.h) in
// every backend, so all backends hold the same bytes for the same inputs.
enum class KvDtype : uint8_t { kF16 = 0, kInt8 = 1, kInt4 = 2 };

// Paged KV cache geometry shared by the kernels and models/.
// Layout of one layer's pool: pages [n_pages][page_size][n_kv_heads][row_bytes()] for K,
// the same for V.
struct KvLayout {
  int page_size = 16;
  int n_kv_heads = 0;
  int head_dim = 0;
  KvDtype dtype = KvDtype::kF16;
  // Bytes of one (token, kv head) row.
  size_t row_bytes() const {
    switch (dtype) {
      case KvDtype::kInt8: return 2 + static_cast<size_t>(head_dim);
      case KvDtype::kInt4: return 4 + static_cast<size_t>(head_dim) / 2;
      case KvDtype::kF16: break;
    }
    return 2 * static_cast<size_t>(head_dim);
  }
  // Bytes of one page of K (or of V).
  size_t page_bytes() const { return static_cast<size_t>(page_size) * n_kv_heads * row_bytes(); }
  // FP16 elements of one page (kF16 only; the CUDA kernels' view).
  size_t page_elems() const { return static_cast<size_t>(page_size) * n_kv_heads * head_dim; }
};

// Attention inputs for a batch of tokens from several sequences. Token t belongs to
// sequence seq_of_token[t] at absolute position positions[t]; it attends to positions
// 0..positions[t] of its sequence, which are already in the cache (append first).
// Sequence s owns pages page_table[page_indptr[s] .. page_indptr[s+1]) in order.
struct AttentionBatch {
  int n_tokens = 0;
  const int32_t* seq_of_token = nullptr;  // [n_tokens]
  const int32_t* positions = nullptr;     // [n_tokens]
  const int32_t* page_indptr = nullptr;   // [n_seqs + 1]
  const int32_t* page_table = nullptr;    // [page_indptr[n_seqs]]
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Packs x [n, k] for MatMul against weights of dtype `wtype`.
  virtual void PackActivations(DType wtype, const float* x, int n, int k,
                               ActivationPack* pack) = 0;

  // y [x.n, w.rows] = x · Wᵀ (row-major). REQUIRES: x.k == w.cols and x was packed for
  // w.dtype.
  virtual void MatMul(const WeightMatrix& w, const ActivationPack& x, float* y) = 0;

  // y [n, dim] = x / rms(x) * gamma, per row. gamma: [dim]. y may alias x.
  virtual void RmsNorm(const float* x, const float* gamma, int n, int dim, float eps,
                       float* y) = 0;

  // y[i] = silu(gate[i]) * up[i] for i < count. y may alias gate.
  virtual void SiluMul(const float* gate, const float* up, int64_t count, float* y) = 0;

  // Rotates x [n, n_heads, head_dim] in place at positions[t] (rope_theta base).
  // adjacent_pairs: pairs (2i, 2i+1) (GGUF layout); else (i, i + head_dim/2) (HF layout).
  virtual void Rope(float* x, const int32_t* positions, int n, int n_heads, int head_dim,
                    float theta, bool adjacent_pairs) = 0;

  // Writes k, v [n, n_kv_heads, head_dim] for each token into its sequence's page slot
  // (slot = positions[t] % page_size of page page_table[page_indptr[s] + pos / page_size]),
  // in layout.dtype. k_pool / v_pool: one layer's pools (KvLayout).
  virtual void AppendKv(const KvLayout& layout, const AttentionBatch& batch, const float* k,
                        const float* v, uint8_t* k_pool, uint8_t* v_pool) = 0;

  // out [n, n_heads, head_dim] = causal softmax(q kᵀ / sqrt(head_dim)) v over the cached
  // K/V of each token's sequence (GQA: head h reads kv head h / (n_heads / n_kv_heads)).
  // q: [n, n_heads, head_dim]. scratch: at least max_position + 1 floats per thread.
  virtual void PagedAttention(const KvLayout& layout, const AttentionBatch& batch,
                              const float* q, int n_heads, const uint8_t* k_pool,
                              const uint8_t* v_pool, float* out) = 0;
};

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_BACKEND_H_
