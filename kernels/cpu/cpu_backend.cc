#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reference_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/kv_quant.h"

namespace loom::kernels {
namespace {

using cpu::KernelTable;

const KernelTable* TableFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512Vnni: return cpu::Avx512VnniKernels();
    case CpuIsa::kAvx2: return cpu::Avx2Kernels();
    case CpuIsa::kScalar: return cpu::ScalarKernels();
  }
  return cpu::ScalarKernels();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

class CpuBackend final : public Backend {
 public:
  CpuBackend(int n_threads, CpuIsa isa)
      : owned_pool_(std::make_unique<ThreadPool>(n_threads)), pool_(*owned_pool_),
        k_(TableFor(isa)), name_(std::string("cpu-") + std::string(CpuIsaName(isa))) {}
  CpuBackend(ThreadPool* shared_pool, CpuIsa isa)
      : pool_(*shared_pool), k_(TableFor(isa)),
        name_(std::string("cpu-") + std::string(CpuIsaName(isa))) {}

  std::string_view name() const override { return name_; }

  void PackActivations(DType wtype, const float* x, int n, int k,
                       ActivationPack* pack) override {
    pack->n = n;
    pack->k = k;
    pack->quantized = DTypeIsQuantized(wtype);
    if (pack->quantized) {
      const int nb = k / 32;
      const size_t need = static_cast<size_t>(n) * nb;
      if (pack->q8.size() < need) pack->q8.resize(need);
      BlockQ8Act* out = pack->q8.data();
      auto quantize = [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) k_->quantize_row(x + i * k, k, out + i * nb);
      };
      const int64_t grain = std::max<int64_t>(1, 16384 / std::max(k, 1));
      Run(n, grain, static_cast<int64_t>(n) * k >= 32768, quantize);
    } else {
      const size_t need = static_cast<size_t>(n) * k;
      if (pack->f32.size() < need) pack->f32.resize(need);
      if (need > 0) std::memcpy(pack->f32.data(), x, need * sizeof(float));
    }
  }

  void MatMul(const WeightMatrix& w, const ActivationPack& x, float* y) override {
    if (x.n <= 0 || w.rows <= 0) return;
    if (x.k != w.cols || x.quantized != DTypeIsQuantized(w.dtype)) return;
    const int n = x.n;
    const int64_t rows = w.rows;
    const int threads = pool_.size();
    int64_t grain;
    if (n == 1) {
      // Bandwidth bound: ~8 chunks per thread for balance, multiples of 4 rows.
      grain = std::max<int64_t>(16, CeilDiv(CeilDiv(rows, threads * 8), 4) * 4);
    } else {
      // Compute bound: keep a chunk's weight rows (~16 KiB) in L1/L2 while the activation
      // groups stream past, but leave >= 4 chunks per thread.
      grain = std::max<int64_t>(2, static_cast<int64_t>(16384 / std::max<size_t>(w.row_bytes, 1)));
      grain = std::min(grain, std::max<int64_t>(2, CeilDiv(rows, threads * 4)));
      grain = CeilDiv(grain, 2) * 2;
    }
    const KernelTable* k = k_;
    if (x.quantized) {
      const BlockQ8Act* xq = x.q8.data();
      const int nb = x.k / 32;
      Run(rows, grain, true, [&](int64_t r0, int64_t r1) {
        k->matmul_q8(w, xq, n, nb, r0, r1, y, rows);
      });
    } else {
      const float* xf = x.f32.data();
      Run(rows, grain, true, [&](int64_t r0, int64_t r1) {
        k->matmul_f32(w, xf, n, x.k, r0, r1, y, rows);
      });
    }
  }

  void RmsNorm(const float* x, const float* gamma, int n, int dim, float eps,
               float* y) override {
    const KernelTable* k = k_;
    const int64_t grain = std::max<int64_t>(1, 8192 / std::max(dim, 1));
    Run(n, grain, static_cast<int64_t>(n) * dim >= 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) k->rmsnorm_row(x + i * dim, gamma, dim, eps, y + i * dim);
    });
  }

  void SiluMul(const float* gate, const float* up, int64_t count, float* y) override {
    const KernelTable* k = k_;
    Run(count, 8192, count >= 32768, [&](int64_t b, int64_t e) {
      k->silu_mul(gate + b, up + b, e - b, y + b);
    });
  }

  void Rope(float* x, const int32_t* positions, int n, int n_heads, int head_dim, float theta,
            bool adjacent_pairs) override {
    if (n <= 0 || head_dim < 2) return;
    int32_t max_pos = 0;
    for (int t = 0; t < n; ++t) max_pos = std::max(max_pos, positions[t]);
    const float* table = RopeTable(max_pos, head_dim, theta);
    const int half = head_dim / 2;
    Run(n, 8, static_cast<int64_t>(n) * n_heads * head_dim >= 32768, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const float* cs = table + static_cast<size_t>(positions[t]) * head_dim;
        for (int h = 0; h < n_heads; ++h) {
          ref::RopeHead(x + (t * n_heads + h) * head_dim, cs, cs + half, head_dim,
                        adjacent_pairs);
        }
      }
    });
  }

  void AppendKv(const KvLayout& layout, const AttentionBatch& batch, const float* k,
                const float* v, uint8_t* k_pool, uint8_t* v_pool) override {
    const int d = layout.head_dim;
    for (int t = 0; t < batch.n_tokens; ++t) {
      const int32_t* pages = batch.page_table + batch.page_indptr[batch.seq_of_token[t]];
      for (int h = 0; h < layout.n_kv_heads; ++h) {
        const size_t src = (static_cast<size_t>(t) * layout.n_kv_heads + h) * d;
        uint8_t* kd = ref::KvRowMut(layout, k_pool, pages, batch.positions[t], h);
        uint8_t* vd = ref::KvRowMut(layout, v_pool, pages, batch.positions[t], h);
        if (layout.dtype == KvDtype::kF16) {  // the vector conversion: same bits
          k_->fp32_to_fp16(k + src, d, reinterpret_cast<uint16_t*>(kd));
          k_->fp32_to_fp16(v + src, d, reinterpret_cast<uint16_t*>(vd));
        } else {  // the shared encoder: every backend writes the same bytes
          QuantizeKvRow(layout.dtype, k + src, d, kd);
          QuantizeKvRow(layout.dtype, v + src, d, vd);
        }
      }
    }
  }

  // One work item = one token x all kv heads when there are enough tokens to keep every
  // thread busy (a page's rows are then read front to back, the next page prefetched),
  // else one token x one kv head. Each K/V row is decoded once per group of query heads.
  // The split does not change any result (attention_heads' contract).
  void PagedAttention(const KvLayout& layout, const AttentionBatch& batch, const float* q,
                      int n_heads, const uint8_t* k_pool, const uint8_t* v_pool,
                      float* out) override {
    const int d = layout.head_dim;
    auto* fn = cpu::VectorAttentionSupported(layout) ? k_->attention_heads
                                                     : cpu::ScalarKernels()->attention_heads;
    const int n_kv = layout.n_kv_heads;
    const int kv_per_item = batch.n_tokens >= 4 * pool_.size() ? n_kv : 1;
    const int items_per_token = n_kv / kv_per_item;
    const int64_t items = static_cast<int64_t>(batch.n_tokens) * items_per_token;
    int64_t work = 0;  // ~ positions attended in total, to decide on threading
    for (int t = 0; t < batch.n_tokens; ++t) work += batch.positions[t] + 1;
    const int64_t grain = std::max<int64_t>(1, items / (pool_.size() * 8));
    const size_t tok_stride = static_cast<size_t>(n_heads) * d;
    Run(items, grain, work * n_heads * d >= 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int t = static_cast<int>(i / items_per_token);
        const int kv0 = static_cast<int>(i % items_per_token) * kv_per_item;
        fn(layout, batch, t, kv0, kv0 + kv_per_item, n_heads, q + t * tok_stride, k_pool,
           v_pool, out + t * tok_stride);
      }
    });
  }

 private:
  template <typename F>
  void Run(int64_t n, int64_t grain, bool parallel, const F& f) {
    if (n <= 0) return;
    if (!parallel || pool_.size() == 1) {
      f(0, n);
      return;
    }
    // A one-reference closure fits std::function's small buffer: no allocation per call.
    const auto thunk = [&f](int64_t b, int64_t e) { f(b, e); };
    pool_.ParallelFor(n, grain, thunk);
  }

  // Rows [pos][cos(head_dim/2) sin(head_dim/2)] for positions 0..max_pos, cached.
  const float* RopeTable(int32_t max_pos, int head_dim, float theta) {
    if (head_dim != rope_dim_ || theta != rope_theta_) {
      rope_.clear();
      rope_rows_ = 0;
      rope_dim_ = head_dim;
      rope_theta_ = theta;
    }
    if (max_pos >= rope_rows_) {
      const int32_t rows = std::max<int32_t>(max_pos + 1, rope_rows_ * 2);
      rope_.resize(static_cast<size_t>(rows) * head_dim);
      for (int32_t p = rope_rows_; p < rows; ++p) {
        float* row = rope_.data() + static_cast<size_t>(p) * head_dim;
        ref::RopeCosSin(p, head_dim, theta, row, row + head_dim / 2);
      }
      rope_rows_ = rows;
    }
    return rope_.data();
  }

  std::unique_ptr<ThreadPool> owned_pool_;  // null when the pool is shared
  ThreadPool& pool_;
  const KernelTable* k_;
  std::string name_;
  std::vector<float> rope_;
  int32_t rope_rows_ = 0;
  int rope_dim_ = 0;
  float rope_theta_ = 0.0f;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackendWithIsa(int n_threads, CpuIsa isa) {
  if (!CpuSupports(isa)) return nullptr;
  return std::make_unique<CpuBackend>(n_threads, isa);
}

std::unique_ptr<Backend> CreateCpuBackend(int n_threads) {
  return CreateCpuBackendWithIsa(n_threads, BestCpuIsa());
}

std::unique_ptr<Backend> CreateCpuBackendOnPool(ThreadPool* pool) {
  return std::make_unique<CpuBackend>(pool, BestCpuIsa());
}

}  // namespace loom::kernels
