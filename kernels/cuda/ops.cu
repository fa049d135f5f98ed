// Per-token model kernels; see ops_launch.h.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/ops_launch.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarp = 32;

__global__ void SiluMulKernel(const float* gate, const float* up, int64_t count, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double g = gate[i];
    y[i] = static_cast<float>(g / (1.0 + exp(-g)) * up[i]);
  }
}

// grid: tokens; threads over (head, pair).
__global__ void RopeKernel(float* x, const int32_t* positions, int n_heads, int head_dim,
                           float theta, bool adjacent_pairs) {
  const int t = blockIdx.x;
  const int half = head_dim / 2;
  const double pos = positions[t];
  float* xt = x + static_cast<int64_t>(t) * n_heads * head_dim;
  for (int idx = threadIdx.x; idx < n_heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    const double inv_freq = pow(static_cast<double>(theta), -2.0 * i / head_dim);
    const double angle = pos * inv_freq;
    const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
    float* xh = xt + h * head_dim;
    const int a = adjacent_pairs ? 2 * i : i;
    const int b = adjacent_pairs ? 2 * i + 1 : i + half;
    const float x0 = xh[a], x1 = xh[b];
    xh[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    xh[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

__device__ __forceinline__ int64_t KvOffset(const KvLayout& l, const AttentionBatch& b, int t,
                                            int32_t pos) {
  const int32_t seq = b.seq_of_token[t];
  const int32_t page = b.page_table[b.page_indptr[seq] + pos / l.page_size];
  return (static_cast<int64_t>(page) * l.page_size + pos % l.page_size) *
         static_cast<int64_t>(l.n_kv_heads) * l.head_dim;
}

// grid: tokens; threads over n_kv_heads * head_dim.
__global__ void AppendKvKernel(KvLayout l, AttentionBatch b, const float* k, const float* v,
                               uint16_t* k_pool, uint16_t* v_pool) {
  const int t = blockIdx.x;
  const int width = l.n_kv_heads * l.head_dim;
  const int64_t dst = KvOffset(l, b, t, b.positions[t]);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    k_pool[dst + i] = __half_as_ushort(__float2half_rn(k[static_cast<int64_t>(t) * width + i]));
    v_pool[dst + i] = __half_as_ushort(__float2half_rn(v[static_cast<int64_t>(t) * width + i]));
  }
}

constexpr int kAttnWarps = 4;
constexpr int kMaxDimsPerLane = kAttentionMaxHeadDim / kWarp;

__device__ __forceinline__ float HalfBits(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__global__ void __launch_bounds__(kAttnWarps * kWarp)
    PagedAttentionKernel(KvLayout l, AttentionBatch b, const float* q, int n_heads,
                         const uint16_t* k_pool, const uint16_t* v_pool, float* out) {
  __shared__ float s_m[kAttnWarps], s_l[kAttnWarps];
  __shared__ float s_acc[kAttnWarps][kAttentionMaxHeadDim];
  const int t = blockIdx.x, h = blockIdx.y;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int d = l.head_dim;
  const int kv_head = h / (n_heads / l.n_kv_heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const float* qh = q + (static_cast<int64_t>(t) * n_heads + h) * d;
  float qv[kMaxDimsPerLane], acc[kMaxDimsPerLane];
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) {
    const int dim = lane + j * kWarp;
    qv[j] = dim < d ? qh[dim] : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, lsum = 0.0f;
  const int32_t last = b.positions[t];
  for (int32_t p = warp; p <= last; p += kAttnWarps) {
    const int64_t off = KvOffset(l, b, t, p) + static_cast<int64_t>(kv_head) * d;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxDimsPerLane; ++j) {
      const int dim = lane + j * kWarp;
      if (dim < d) s = fmaf(qv[j], HalfBits(k_pool[off + dim]), s);
    }
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    s *= scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // m = -inf on the first position: 0
    const float e = expf(s - m_new);
    lsum = lsum * corr + e;
#pragma unroll
    for (int j = 0; j < kMaxDimsPerLane; ++j) {
      const int dim = lane + j * kWarp;
      if (dim < d) acc[j] = acc[j] * corr + e * HalfBits(v_pool[off + dim]);
    }
    m = m_new;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = lsum;
  }
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) {
    const int dim = lane + j * kWarp;
    if (dim < d) s_acc[warp][dim] = acc[j];
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, s_m[w]);
  float denom = 0.0f, wgt[kAttnWarps];
  for (int w = 0; w < kAttnWarps; ++w) {
    wgt[w] = s_m[w] == -INFINITY ? 0.0f : expf(s_m[w] - mx);  // warps with no position
    denom += s_l[w] * wgt[w];
  }
  float* oh = out + (static_cast<int64_t>(t) * n_heads + h) * d;
  for (int dim = threadIdx.x; dim < d; dim += blockDim.x) {
    float a = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) a += s_acc[w][dim] * wgt[w];
    oh[dim] = a / denom;
  }
}

__global__ void EmbeddingGatherKernel(int dtype, const uint8_t* table, int64_t rows,
                                      size_t row_bytes, int cols, const int32_t* ids,
                                      float* out) {
  const int t = blockIdx.x;
  const int32_t id = ids[t];
  float* o = out + static_cast<int64_t>(t) * cols;
  if (id < 0 || id >= rows) {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = 0.0f;
    return;
  }
  const uint8_t* row = table + static_cast<int64_t>(id) * row_bytes;
  const DType dt = static_cast<DType>(dtype);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = 0.0f;
    if (dt == DType::kF32) {
      v = reinterpret_cast<const float*>(row)[c];
    } else if (dt == DType::kF16) {
      v = HalfBits(reinterpret_cast<const uint16_t*>(row)[c]);
    } else if (dt == DType::kBF16) {
      v = __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[c]) << 16);
    } else {  // kQ8_0: blocks {fp16 d; int8 qs[32]}
      const uint8_t* blk = row + static_cast<int64_t>(c / 32) * 34;
      const uint16_t dbits = static_cast<uint16_t>(blk[0] | (blk[1] << 8));
      v = static_cast<float>(static_cast<int8_t>(blk[2 + c % 32])) * HalfBits(dbits);
    }
    o[c] = v;
  }
}

int Threads(int work) {
  int t = (work + kWarp - 1) / kWarp * kWarp;
  return t < kWarp ? kWarp : (t > 256 ? 256 : t);
}

}  // namespace

cudaError_t LaunchSiluMul(const float* gate, const float* up, int64_t count, float* y,
                          cudaStream_t stream) {
  int64_t blocks = (count + 255) / 256;
  if (blocks > 65535) blocks = 65535;
  SiluMulKernel<<<static_cast<int>(blocks), 256, 0, stream>>>(gate, up, count, y);
  return cudaGetLastError();
}

cudaError_t LaunchRope(float* x, const int32_t* positions, int n, int n_heads, int head_dim,
                       float theta, bool adjacent_pairs, cudaStream_t stream) {
  RopeKernel<<<n, Threads(n_heads * head_dim / 2), 0, stream>>>(x, positions, n_heads, head_dim,
                                                                theta, adjacent_pairs);
  return cudaGetLastError();
}

cudaError_t LaunchAppendKv(const KvLayout& layout, const AttentionBatch& batch, const float* k,
                           const float* v, uint16_t* k_pool, uint16_t* v_pool,
                           cudaStream_t stream) {
  AppendKvKernel<<<batch.n_tokens, Threads(layout.n_kv_heads * layout.head_dim), 0, stream>>>(
      layout, batch, k, v, k_pool, v_pool);
  return cudaGetLastError();
}

cudaError_t LaunchPagedAttention(const KvLayout& layout, const AttentionBatch& batch,
                                 const float* q, int n_heads, const uint16_t* k_pool,
                                 const uint16_t* v_pool, float* out, cudaStream_t stream) {
  const dim3 grid(batch.n_tokens, n_heads);
  PagedAttentionKernel<<<grid, kAttnWarps * kWarp, 0, stream>>>(layout, batch, q, n_heads,
                                                                k_pool, v_pool, out);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingGather(int dtype, const uint8_t* table, int64_t rows,
                                  size_t row_bytes, int cols, const int32_t* ids, int n,
                                  float* out, cudaStream_t stream) {
  EmbeddingGatherKernel<<<n, Threads(cols), 0, stream>>>(dtype, table, rows, row_bytes, cols,
                                                         ids, out);
  return cudaGetLastError();
}

}  // namespace loom::kernels::cuda
