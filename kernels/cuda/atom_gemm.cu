// Atom W4A4 / W4A8 / W8A8 GEMM with integer tensor-core MMA and the per-group FP32
// rescale fused into the accumulation; and the activation quantizer (optionally fused
// with RMSNorm or SiLU*mul). See atom_gemm_launch.h.
//
// GEMM tiling: block = 4 warps = 32 tokens x 64 output channels; warp = 16 tokens x 32
// channels (4 mma n-tiles sharing one A fragment). Operands come straight from global
// memory (L1-cached) in 8-byte loads; no shared-memory staging or cp.async pipeline yet.
//
// K order inside a group. The integer dot D[g] is a sum over the group, so any
// permutation of k inside the group used identically for A and B leaves it unchanged.
// Thread (gid, tig) of a warp owns the contiguous quarter [tig·G/4, (tig+1)·G/4) of each
// group G and feeds k-step s from its 8 bytes at offset s·8 of that quarter: the mma's
// logical columns {tig·8..} (s4) / {tig·4..} (s8) map to the first 4 bytes, {+32} / {+16}
// to the next 4 — for A and B alike.
#include <cstdint>

#include "kernels/cuda/atom_gemm_launch.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kNTiles = 4;  // 8-wide n-tiles per warp
constexpr int kBlockM = 32;
constexpr int kBlockN = 64;
constexpr int kGemmThreads = 128;

__device__ __forceinline__ void MmaS4(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                      int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void MmaS8(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                      int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint2 Load8(const uint8_t* p, bool valid) {
  return valid ? *reinterpret_cast<const uint2*>(p) : make_uint2(0u, 0u);
}

// 4 two's-complement nibbles (low 16 bits of h) -> 4 sign-extended int8 bytes.
__device__ __forceinline__ uint32_t NibblesToBytes(uint32_t h) {
  const uint32_t spread = (h & 0xFu) | ((h & 0xF0u) << 4) | ((h & 0xF00u) << 8) |
                          ((h & 0xF000u) << 12);
  return __vsub4(spread ^ 0x08080808u, 0x08080808u);
}

// c[nt][*] += integer dot over one group (or the outlier block) of `len` k values
// starting at element `k0` of each row. kA4: A and B 4-bit (s4 mma); else A int8 with
// B int8 (kW4 false) or B 4-bit unpacked in registers (kW4 true).
template <bool kA4, bool kW4>
__device__ __forceinline__ void GroupDot(const uint8_t* a_row0, const uint8_t* a_row1,
                                         bool a0_ok, bool a1_ok, const uint8_t* const* b_rows,
                                         const bool* b_ok, int k0, int len, int tig,
                                         int (&c)[kNTiles][4]) {
  const int quarter = len / 4;  // elements this thread owns
  if constexpr (kA4) {
    // Nibbles: k-step s covers 16 elements = 8 bytes at byte (k0 + tig·quarter)/2 + 8s.
    const int byte0 = (k0 + tig * quarter) / 2;
    for (int s = 0; s < quarter / 16; ++s) {
      const int off = byte0 + 8 * s;
      const uint2 x0 = Load8(a_row0 + off, a0_ok), x1 = Load8(a_row1 + off, a1_ok);
      const uint32_t a[4] = {x0.x, x1.x, x0.y, x1.y};
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        const uint2 w = Load8(b_rows[nt] + off, b_ok[nt]);
        MmaS4(a, w.x, w.y, c[nt]);
      }
    }
  } else {
    // Bytes: k-step s covers 8 elements at element k0 + tig·quarter + 8s.
    const int e0 = k0 + tig * quarter;
    for (int s = 0; s < quarter / 8; ++s) {
      const int e = e0 + 8 * s;
      const uint2 x0 = Load8(a_row0 + e, a0_ok), x1 = Load8(a_row1 + e, a1_ok);
      const uint32_t a[4] = {x0.x, x1.x, x0.y, x1.y};
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        if constexpr (kW4) {
          const uint32_t h =
              b_ok[nt] ? *reinterpret_cast<const uint32_t*>(b_rows[nt] + e / 2) : 0u;
          MmaS8(a, NibblesToBytes(h & 0xFFFFu), NibblesToBytes(h >> 16), c[nt]);
        } else {
          const uint2 w = Load8(b_rows[nt] + e, b_ok[nt]);
          MmaS8(a, w.x, w.y, c[nt]);
        }
      }
    }
  }
}

template <bool kA4, bool kW4>
__global__ void __launch_bounds__(kGemmThreads)
    AtomGemmKernel(AtomGpuGeometry geo, AtomGpuWeights w, AtomGpuActivations x, float* y) {
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int gid = lane >> 2, tig = lane & 3;
  const int m0 = blockIdx.y * kBlockM + (warp / 2) * 16;
  const int n0 = blockIdx.x * kBlockN + (warp % 2) * (kNTiles * 8);
  const int ra0 = m0 + gid, ra1 = m0 + gid + 8;
  const bool a0_ok = ra0 < x.n, a1_ok = ra1 < x.n;
  const int a_bytes = geo.act_row_bytes(), w_bytes = geo.weight_row_bytes();
  const uint8_t* a_row0 = x.q + static_cast<int64_t>(a0_ok ? ra0 : 0) * a_bytes;
  const uint8_t* a_row1 = x.q + static_cast<int64_t>(a1_ok ? ra1 : 0) * a_bytes;
  const uint8_t* b_rows[kNTiles];
  bool b_ok[kNTiles];
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
    const int r = n0 + nt * 8 + gid;
    b_ok[nt] = r < w.rows;
    b_rows[nt] = w.q + static_cast<int64_t>(b_ok[nt] ? r : 0) * w_bytes;
  }
  // Output element (row m, col n) of c[nt][i]: m = gid (+8 for i >= 2),
  // n = n0 + nt·8 + tig·2 + (i & 1).
  float acc[kNTiles][4];
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  }
  const int ng = geo.n_groups;
  for (int g = 0; g < ng; ++g) {
    int c[kNTiles][4] = {};
    GroupDot<kA4, kW4>(a_row0, a_row1, a0_ok, a1_ok, b_rows, b_ok, g * geo.group, geo.group,
                       tig, c);
    const float sa[2] = {a0_ok ? x.scales[static_cast<int64_t>(ra0) * ng + g] : 0.0f,
                         a1_ok ? x.scales[static_cast<int64_t>(ra1) * ng + g] : 0.0f};
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = n0 + nt * 8 + tig * 2 + j;
        const float sw = col < w.rows ? w.scales[static_cast<int64_t>(col) * ng + g] : 0.0f;
        acc[nt][j] = __fmaf_rn(static_cast<float>(c[nt][j]), __fmul_rn(sa[0], sw), acc[nt][j]);
        acc[nt][2 + j] =
            __fmaf_rn(static_cast<float>(c[nt][2 + j]), __fmul_rn(sa[1], sw), acc[nt][2 + j]);
      }
    }
  }
  if (geo.n_outliers > 0) {
    const int no = geo.n_out_pad;
    const uint8_t* o_row0 =
        reinterpret_cast<const uint8_t*>(x.q_outlier) + static_cast<int64_t>(a0_ok ? ra0 : 0) * no;
    const uint8_t* o_row1 =
        reinterpret_cast<const uint8_t*>(x.q_outlier) + static_cast<int64_t>(a1_ok ? ra1 : 0) * no;
    const uint8_t* ob_rows[kNTiles];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int r = n0 + nt * 8 + gid;
      ob_rows[nt] = reinterpret_cast<const uint8_t*>(w.q_outlier) +
                    static_cast<int64_t>(b_ok[nt] ? r : 0) * no;
    }
    int c[kNTiles][4] = {};
    GroupDot<false, false>(o_row0, o_row1, a0_ok, a1_ok, ob_rows, b_ok, 0, no, tig, c);
    const float so[2] = {a0_ok ? x.outlier_scales[ra0] : 0.0f,
                         a1_ok ? x.outlier_scales[ra1] : 0.0f};
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = n0 + nt * 8 + tig * 2 + j;
        const float sw = col < w.rows ? w.outlier_scales[col] : 0.0f;
        acc[nt][j] = __fmaf_rn(static_cast<float>(c[nt][j]), __fmul_rn(so[0], sw), acc[nt][j]);
        acc[nt][2 + j] =
            __fmaf_rn(static_cast<float>(c[nt][2 + j]), __fmul_rn(so[1], sw), acc[nt][2 + j]);
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = i < 2 ? ra0 : ra1;
      const int col = n0 + nt * 8 + tig * 2 + (i & 1);
      if (m < x.n && col < w.rows) y[static_cast<int64_t>(m) * w.rows + col] = acc[nt][i];
    }
  }
}

// ---- activation quantization ----

constexpr int kQuantThreads = 128;

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The header's rule on one value: clamp(rint(v * inv), -qmax, qmax).
__device__ __forceinline__ int QuantizeValue(float v, float inv, int qmax) {
  const int q = __float2int_rn(__fmul_rn(v, inv));
  return max(-qmax, min(qmax, q));
}

// Quantizes hp[j0, j0 + len) (shared memory; only `valid` of them real, the rest zero)
// with one warp. Each lane owns len/32 consecutive values. Writes 4-bit (packed, bits 4)
// or int8 into dst (element j0 of the row is dst's element 0) and the scale.
__device__ void QuantizeSpanWarp(const float* hp, int len, int valid, int bits, uint8_t* dst,
                                 float* scale_out, int lane) {
  const int per = len / kWarp;
  const int e0 = lane * per;
  float amax = 0.0f;
  for (int i = 0; i < per; ++i) {
    if (e0 + i < valid) amax = fmaxf(amax, fabsf(hp[e0 + i]));
  }
  amax = WarpMax(amax);
  const int qmax = bits == 4 ? 7 : 127;
  const float fq = static_cast<float>(qmax);
  const float inv = amax > 0.0f ? __fdiv_rn(fq, amax) : 0.0f;
  if (bits == 4) {
    for (int i = 0; i < per; i += 2) {
      const int q0 = e0 + i < valid ? QuantizeValue(hp[e0 + i], inv, qmax) : 0;
      const int q1 = e0 + i + 1 < valid ? QuantizeValue(hp[e0 + i + 1], inv, qmax) : 0;
      dst[(e0 + i) / 2] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    }
  } else {
    for (int i = 0; i < per; ++i) {
      dst[e0 + i] = static_cast<uint8_t>(
          static_cast<int8_t>(e0 + i < valid ? QuantizeValue(hp[e0 + i], inv, qmax) : 0));
    }
  }
  if (lane == 0) *scale_out = __fdiv_rn(amax, fq);
}

// h [n] <- T h (hadamard_transform.h's canonical sequence, B blocks of K·P) by the whole
// block; z [n] is scratch. Every thread calls it (it synchronises).
__device__ void HadamardInShared(const GpuHadamard& rot, float* h, float* z) {
  const int n = rot.n, p = rot.p, half = rot.p / 2, kp = rot.k * rot.p;
  if (rot.signs != nullptr) {
    for (int i = threadIdx.x; i < n; i += kQuantThreads) h[i] = __fmul_rn(h[i], rot.signs[i]);
  }
  __syncthreads();
  for (int s = 1; s < p; s <<= 1) {
    for (int idx = threadIdx.x; idx < n / 2; idx += kQuantThreads) {
      const int a = idx / half, t = idx % half;
      const int j = a * p + (t / s) * 2 * s + (t % s);
      const float u = h[j], w = h[j + s];
      h[j] = __fadd_rn(u, w);
      h[j + s] = __fsub_rn(u, w);
    }
    __syncthreads();
  }
  if (rot.k > 1) {
    for (int i = threadIdx.x; i < n; i += kQuantThreads) {
      const int c0 = (i / kp) * kp, a = (i % kp) / p, b = i % p;
      const int8_t* row = rot.hk + a * rot.k;
      float acc = row[0] > 0 ? h[c0 + b] : -h[c0 + b];
      for (int a2 = 1; a2 < rot.k; ++a2) {
        const float v = h[c0 + a2 * p + b];
        acc = row[a2] > 0 ? __fadd_rn(acc, v) : __fsub_rn(acc, v);
      }
      z[i] = acc;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += kQuantThreads) h[i] = __fmul_rn(z[i], rot.scale);
  } else {
    for (int i = threadIdx.x; i < n; i += kQuantThreads) h[i] = __fmul_rn(h[i], rot.scale);
  }
}

__global__ void __launch_bounds__(kQuantThreads)
    AtomQuantizeKernel(AtomGpuGeometry geo, AtomPrologue mode, const float* x,
                       const float* gamma_or_up, float eps, const int32_t* perm,
                       AtomGpuActivations out, float* permuted, GpuHadamard rot) {
  extern __shared__ float smem[];  // h [k], then hp [k] (and z [k] when rotating)
  float* h = smem;
  float* hp = smem + geo.k;
  __shared__ float warp_sums[kQuantThreads / kWarp];
  const int row = blockIdx.x;
  const int k = geo.k;
  const float* xr = x + static_cast<int64_t>(row) * k;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (mode == AtomPrologue::kRmsNorm) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < k; i += kQuantThreads) ss = fmaf(xr[i], xr[i], ss);
    ss = WarpSum(ss);
    if (lane == 0) warp_sums[warp] = ss;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < kQuantThreads / kWarp; ++i) total += warp_sums[i];
    const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(k) + eps);
    for (int i = threadIdx.x; i < k; i += kQuantThreads) h[i] = xr[i] * inv_rms * gamma_or_up[i];
  } else if (mode == AtomPrologue::kSiluMul) {
    const float* ur = gamma_or_up + static_cast<int64_t>(row) * k;
    for (int i = threadIdx.x; i < k; i += kQuantThreads) {
      const double g = xr[i];
      h[i] = static_cast<float>(g / (1.0 + exp(-g)) * ur[i]);
    }
  } else {
    for (int i = threadIdx.x; i < k; i += kQuantThreads) h[i] = xr[i];
  }
  __syncthreads();
  for (int j = threadIdx.x; j < k; j += kQuantThreads) hp[j] = h[perm != nullptr ? perm[j] : j];
  __syncthreads();
  if (rot.n > 0) {  // the first rot.n permuted channels; h is free scratch now
    HadamardInShared(rot, hp, h);
    __syncthreads();
  }
  if (permuted != nullptr) {
    for (int j = threadIdx.x; j < k; j += kQuantThreads) {
      permuted[static_cast<int64_t>(row) * k + j] = hp[j];
    }
  }
  uint8_t* qrow = out.q + static_cast<int64_t>(row) * geo.act_row_bytes();
  for (int g = warp; g < geo.n_groups; g += kQuantThreads / kWarp) {
    const int j0 = g * geo.group;
    const int valid = min(geo.group, geo.k_normal - j0);
    QuantizeSpanWarp(hp + j0, geo.group, valid, geo.a_bits,
                     qrow + (geo.a_bits == 4 ? j0 / 2 : j0),
                     out.scales + static_cast<int64_t>(row) * geo.n_groups + g, lane);
  }
  if (geo.n_outliers > 0 && warp == 0) {
    QuantizeSpanWarp(hp + geo.k_normal, geo.n_out_pad, geo.n_outliers, 8,
                     reinterpret_cast<uint8_t*>(out.q_outlier) +
                         static_cast<int64_t>(row) * geo.n_out_pad,
                     out.outlier_scales + row, lane);
  }
}

}  // namespace

cudaError_t LaunchAtomGemm(const AtomGpuGeometry& geo, const AtomGpuWeights& w,
                           const AtomGpuActivations& x, float* y, cudaStream_t stream) {
  const dim3 grid((w.rows + kBlockN - 1) / kBlockN, (x.n + kBlockM - 1) / kBlockM);
  if (geo.a_bits == 4) {
    AtomGemmKernel<true, true><<<grid, kGemmThreads, 0, stream>>>(geo, w, x, y);
  } else if (geo.w_bits == 4) {
    AtomGemmKernel<false, true><<<grid, kGemmThreads, 0, stream>>>(geo, w, x, y);
  } else {
    AtomGemmKernel<false, false><<<grid, kGemmThreads, 0, stream>>>(geo, w, x, y);
  }
  return cudaGetLastError();
}

cudaError_t LaunchAtomQuantize(const AtomGpuGeometry& geo, AtomPrologue mode, const float* x,
                               const float* gamma_or_up, float eps, const int32_t* perm,
                               int n, const AtomGpuActivations& out, float* permuted,
                               cudaStream_t stream) {
  // h and hp (the quantizer reads only the `valid` values of a span: indices < k).
  const size_t smem = sizeof(float) * 2 * static_cast<size_t>(geo.k);
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        AtomQuantizeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  AtomQuantizeKernel<<<n, kQuantThreads, smem, stream>>>(geo, mode, x, gamma_or_up, eps, perm,
                                                         out, permuted, GpuHadamard());
  return cudaGetLastError();
}

cudaError_t LaunchAtomHadamardQuantize(const AtomGpuGeometry& geo, AtomPrologue mode,
                                       const float* x, const float* up, const GpuHadamard& rot,
                                       const int32_t* perm, int n, const AtomGpuActivations& out,
                                       float* rotated, cudaStream_t stream) {
  const size_t smem = sizeof(float) * 2 * static_cast<size_t>(geo.k);  // h, hp
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        AtomQuantizeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  AtomQuantizeKernel<<<n, kQuantThreads, smem, stream>>>(geo, mode, x, up, 0.0f, perm, out,
                                                         rotated, rot);
  return cudaGetLastError();
}

}  // namespace loom::kernels::cuda
