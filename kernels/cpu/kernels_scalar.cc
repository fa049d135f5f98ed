// Scalar fallback kernels (any CPU): the reference row kernels, with thread-local scratch.
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reference_kernels.h"

namespace loom::kernels::cpu {
namespace {

void MatMulQ8(const WeightMatrix& w, const BlockQ8Act* x, int n, int nb, int64_t r0,
              int64_t r1, float* y, int64_t ys) {
  for (int c = 0; c < n; ++c) {
    for (int64_t r = r0; r < r1; ++r) {
      y[c * ys + r] = ref::DotQ8(w.dtype, w.data + r * w.row_bytes,
                                 x + static_cast<int64_t>(c) * nb, nb);
    }
  }
}

void MatMulF32(const WeightMatrix& w, const float* x, int n, int k, int64_t r0, int64_t r1,
               float* y, int64_t ys) {
  for (int c = 0; c < n; ++c) {
    for (int64_t r = r0; r < r1; ++r) {
      y[c * ys + r] =
          ref::DotFloat(w.dtype, w.data + r * w.row_bytes, x + static_cast<int64_t>(c) * k, k);
    }
  }
}

void SiluMul(const float* g, const float* u, int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = ref::SiluMul(g[i], u[i]);
}

void Fp32ToFp16Row(const float* x, int count, uint16_t* y) {
  for (int i = 0; i < count; ++i) y[i] = Fp32ToFp16(x[i]);
}

void AttentionHeads(const KvLayout& l, const AttentionBatch& b, int t, int kv0, int kv1,
                    int n_heads, const float* q_tok, const uint8_t* k_pool,
                    const uint8_t* v_pool, float* out_tok) {
  thread_local std::vector<double> scratch;
  thread_local std::vector<float> row;
  const size_t need = static_cast<size_t>(b.positions[t]) + 1;
  if (scratch.size() < need) scratch.resize(need);
  if (row.size() < static_cast<size_t>(l.head_dim)) row.resize(l.head_dim);
  const int g = n_heads / l.n_kv_heads;
  for (int h = kv0 * g; h < kv1 * g; ++h) {
    const size_t off = static_cast<size_t>(h) * l.head_dim;
    ref::AttentionHead(l, b, t, h, n_heads, q_tok + off, k_pool, v_pool, scratch.data(),
                       row.data(), out_tok + off);
  }
}

const KernelTable kScalarTable = {
    "scalar",  MatMulQ8, MatMulF32, QuantizeRowQ8, ref::RmsNormRow, SiluMul, Fp32ToFp16Row,
    AttentionHeads,
};

}  // namespace

const KernelTable* ScalarKernels() { return &kScalarTable; }

}  // namespace loom::kernels::cpu

namespace loom::kernels {

bool CpuSupports(CpuIsa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  switch (isa) {
    case CpuIsa::kScalar: return true;
    case CpuIsa::kAvx2: return avx2;
    case CpuIsa::kAvx512Vnni:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return isa == CpuIsa::kScalar;
#endif
}

CpuIsa BestCpuIsa() {
  if (CpuSupports(CpuIsa::kAvx512Vnni)) return CpuIsa::kAvx512Vnni;
  if (CpuSupports(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kScalar;
}

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512Vnni: return "avx512vnni";
  }
  return "?";
}

}  // namespace loom::kernels
