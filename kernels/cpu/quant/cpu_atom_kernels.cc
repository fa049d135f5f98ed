#include "kernels/cpu/quant/cpu_atom_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/quant/atom_cpu_kernels.h"
#include "kernels/cpu/rotation/cpu_hadamard.h"

namespace loom::kernels::quant {
namespace {

using cpu::quant::AtomKernelTable;
using cpu::quant::MatMulPlan;
using cpu::quant::RowBlockWeight;

const AtomKernelTable* TableFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512Vnni: return cpu::quant::Avx512VnniAtomKernels();
    case CpuIsa::kAvx2: return cpu::quant::Avx2AtomKernels();
    case CpuIsa::kScalar: return cpu::quant::ScalarAtomKernels();
  }
  return cpu::quant::ScalarAtomKernels();
}

// Groups up to 1024 keep float(D) exact (as the vector tables' Supports).
constexpr int kMaxRowBlockGroup = 1024;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

template <typename T>
T* Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

class CpuAtomKernels final : public AtomKernels {
 public:
  CpuAtomKernels(ThreadPool* pool, CpuIsa isa)
      : pool_(*pool), k_(TableFor(isa)), isa_(isa),
        name_(std::string("atom-cpu-") + std::string(CpuIsaName(isa))) {}

  std::string_view name() const override { return name_; }

  void Quantize(const float* x, int n, const int32_t* perm, const QuantSpec& spec,
                AtomActivations* out, float* permuted) override {
    out->Resize(spec, n);
    const int k = spec.k;
    ForRows(n, k, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        float* dst = permuted != nullptr ? permuted + t * k : Scratch(k);
        Permute(x + t * k, perm, k, dst);
        QuantizeInto(dst, static_cast<int>(t), out);
      }
    });
  }

  void RmsNormQuantize(const float* x, const float* gamma, int n, float eps,
                       const int32_t* perm, const QuantSpec& spec, AtomActivations* out,
                       float* normed) override {
    out->Resize(spec, n);
    const int k = spec.k;
    ForRows(n, k, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        float* h = Scratch(2 * k);
        float* dst = normed != nullptr ? normed + t * k : h + k;
        if (perm == nullptr) {
          k_->rmsnorm_row(x + t * k, gamma, k, eps, dst);
        } else {
          k_->rmsnorm_row(x + t * k, gamma, k, eps, h);
          Permute(h, perm, k, dst);
        }
        QuantizeInto(dst, static_cast<int>(t), out);
      }
    });
  }

  void SiluMulQuantize(const float* gate, const float* up, int n, const QuantSpec& spec,
                       AtomActivations* out, float* h) override {
    out->Resize(spec, n);
    const int k = spec.k;
    ForRows(n, k, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        float* dst = h != nullptr ? h + t * k : Scratch(k);
        k_->silu_mul(gate + t * k, up + t * k, k, dst);
        QuantizeInto(dst, static_cast<int>(t), out);
      }
    });
  }

  void HadamardQuantize(const float* x, int n, const HadamardTransform& t, const int32_t* perm,
                        const QuantSpec& spec, AtomActivations* out, float* rotated) override {
    out->Resize(spec, n);
    const int k = spec.k;
    ForRows(n, k, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        float* scratch = Scratch(2 * k);
        float* dst = rotated != nullptr ? rotated + row * k : scratch + k;
        Permute(x + row * k, perm, k, dst);
        CpuHadamardRows(t, dst, 1, false, scratch, isa_);
        QuantizeInto(dst, static_cast<int>(row), out);
      }
    });
  }

  void SiluMulHadamardQuantize(const float* gate, const float* up, int n,
                               const HadamardTransform& t, const int32_t* perm,
                               const QuantSpec& spec, AtomActivations* out,
                               float* rotated) override {
    out->Resize(spec, n);
    const int k = spec.k;
    ForRows(n, k, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        float* h = Scratch(3 * k);
        k_->silu_mul(gate + row * k, up + row * k, k, h);
        float* dst = rotated != nullptr ? rotated + row * k : h + 2 * k;
        Permute(h, perm, k, dst);
        CpuHadamardRows(t, dst, 1, false, h + k, isa_);
        QuantizeInto(dst, static_cast<int>(row), out);
      }
    });
  }

  void HadamardRows(const HadamardTransform& t, float* x, int n, bool transpose) override {
    const int k = t.n();
    ForRows(n, k, [&](int64_t b, int64_t e) {
      CpuHadamardRows(t, x + b * k, e - b, transpose, Scratch(k), isa_);
    });
  }

  // The row-block layout (row_block_weight.h) when this ISA has row-block tiles.
  std::unique_ptr<PreparedAtomWeight> Prepare(const AtomWeightView& w) override {
    if (k_->matmul_row_blocks == nullptr || w.rows <= 0 || !RowBlockWeight::Supports(w.spec) ||
        w.spec.group > kMaxRowBlockGroup) {
      return nullptr;
    }
    return std::make_unique<RowBlockWeight>(RowBlockWeight::Pack(w));
  }

  void MatMul(const AtomWeightView& w, const AtomActivations& x, float* y) override {
    const AtomWeightView* ws[1] = {&w};
    float* ys[1] = {y};
    MatMulMany(ws, 1, x, ys);
  }

  // One plan and one parallel region over the concatenated rows of every weight; a chunk
  // that straddles two weights runs each part with its own output. Chunking does not
  // change any result (each element's sequence is fixed; see atom_cpu_kernels.h).
  void MatMulMany(const AtomWeightView* const* ws, int count, const AtomActivations& x,
                  float* const* ys) override {
    if (x.n <= 0 || count <= 0) return;
    int64_t total = 0;
    bool all_match = true;
    for (int i = 0; i < count; ++i) {
      if (x.spec != ws[i]->spec) {
        std::fill(ys[i], ys[i] + static_cast<size_t>(x.n) * std::max<int64_t>(ws[i]->rows, 0),
                  std::numeric_limits<float>::quiet_NaN());
        all_match = false;
      }
      total += std::max<int64_t>(ws[i]->rows, 0);
    }
    if (!all_match) {  // the NaN rule per weight; the matching ones one at a time
      for (int i = 0; i < count; ++i) {
        if (x.spec == ws[i]->spec) MatMulMany(ws + i, 1, x, ys + i);
      }
      return;
    }
    if (total <= 0) return;
    // Row blocks when every weight was prepared by this ISA's Prepare; else the views.
    std::vector<cpu::quant::RowBlockView>& blocks = row_block_views_;
    blocks.clear();
    for (int i = 0; i < count && k_->matmul_row_blocks != nullptr; ++i) {
      const auto* rb = dynamic_cast<const RowBlockWeight*>(ws[i]->prepared);
      if (rb == nullptr || rb->spec() != x.spec) break;
      const cpu::quant::RowBlockView v = rb->view();
      if (v.rows != ws[i]->rows) break;  // not this view's copy
      blocks.push_back(v);
    }
    const bool row_blocks = static_cast<int>(blocks.size()) == count;
    const AtomKernelTable* k =
        row_blocks || k_->supports(x.spec) ? k_ : cpu::quant::ScalarAtomKernels();
    const MatMulPlan plan = Plan(x, k);
    const int threads = pool_.size();
    int64_t grain;
    if (x.n == 1) {  // bandwidth bound: ~8 chunks per thread, whole 8-row tiles
      grain = std::max<int64_t>(8, RoundUp(CeilDiv(total, threads * 8), 8));
    } else {  // compute bound: >= 4 chunks per thread, whole 8-row blocks (2-row tiles)
      const int64_t unit = row_blocks ? cpu::quant::kBlockRows : 2;
      grain = std::max<int64_t>(unit, RoundUp(CeilDiv(total, threads * 4), unit));
    }
    const bool parallel = static_cast<int64_t>(x.n) * total * x.spec.k >= (1 << 16);
    Run(total, grain, parallel, [&](int64_t b, int64_t e) {
      int64_t base = 0;
      for (int i = 0; i < count && base < e; ++i) {
        const int64_t rows = ws[i]->rows;
        const int64_t r0 = std::max<int64_t>(b - base, 0), r1 = std::min<int64_t>(e - base, rows);
        if (r0 < r1) {
          if (row_blocks) {
            k->matmul_row_blocks(plan, blocks[i], r0, r1, ys[i], rows);
          } else {
            k->matmul(plan, *ws[i], r0, r1, ys[i], rows);
          }
        }
        base += rows;
      }
    });
  }

 private:
  // Rearranges x for the tiles (see MatMulPlan); single-threaded, O(n * k).
  MatMulPlan Plan(const AtomActivations& x, const AtomKernelTable* k) {
    const QuantSpec& s = x.spec;
    MatMulPlan p;
    p.n = x.n;
    p.n_pad = x.n == 1 ? 1 : static_cast<int>(RoundUp(x.n, cpu::quant::kTokenTile));
    p.k_normal_padded = s.k_normal_padded();
    p.n_groups = s.n_groups();
    p.group = s.group;
    p.n_outliers = s.n_outliers;
    p.outliers_padded = static_cast<int>(RoundUp(s.n_outliers, 32));
    p.w_bits = s.w_bits;
    p.a_bits = s.a_bits;
    p.w_row_bytes = s.weight_row_bytes();
    const size_t kp = p.k_normal_padded, ng = p.n_groups, np = p.n_pad;
    if (p.n_pad == p.n) {
      p.xq = x.q.data();
    } else {
      int8_t* xq = Grow(xq_, np * kp);
      std::memcpy(xq, x.q.data(), static_cast<size_t>(x.n) * kp);
      std::memset(xq + x.n * kp, 0, (np - x.n) * kp);
      p.xq = xq;
    }
    float* st = Grow(scales_t_, ng * np);
    int32_t* ct = Grow(corr_t_, ng * np);
    int32_t* sums = Grow(sums_, ng);
    for (size_t t = 0; t < np; ++t) {
      const bool real = t < static_cast<size_t>(x.n);
      if (real) k->group_sums(p.xq + t * kp, p.n_groups, p.group, sums);
      for (size_t g = 0; g < ng; ++g) {
        st[g * np + t] = real ? x.scales[t * ng + g] : 0.0f;
        ct[g * np + t] = real ? 8 * sums[g] : 0;
      }
    }
    p.scales_t = st;
    p.corr_t = ct;
    const size_t no = s.n_outliers, op = p.outliers_padded;
    int8_t* xo = Grow(xo_, std::max<size_t>(np * op, 1));
    float* so = Grow(so_, np);
    std::memset(xo, 0, np * op);
    for (size_t t = 0; t < np; ++t) {
      const bool real = t < static_cast<size_t>(x.n);
      if (real && no > 0) std::memcpy(xo + t * op, x.q_outlier.data() + t * no, no);
      so[t] = real && no > 0 ? x.outlier_scales[t] : 0.0f;
    }
    p.xo = xo;
    p.outlier_scales = so;
    return p;
  }

  void QuantizeInto(const float* xp, int t, AtomActivations* out) const {
    const QuantSpec& s = out->spec;
    k_->quantize_row(xp, s, out->q.data() + static_cast<size_t>(t) * s.k_normal_padded(),
                     out->scales.data() + static_cast<size_t>(t) * s.n_groups(),
                     out->q_outlier.data() + static_cast<size_t>(t) * s.n_outliers,
                     out->outlier_scales.data() + t);
  }

  static void Permute(const float* src, const int32_t* perm, int k, float* dst) {
    if (perm == nullptr) {
      if (dst != src) std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return;
    }
    for (int j = 0; j < k; ++j) dst[j] = src[perm[j]];
  }

  // Per-thread float scratch of at least `count` values.
  static float* Scratch(int count) {
    thread_local std::vector<float> buf;
    return Grow(buf, static_cast<size_t>(count));
  }

  // Rows of activation work: parallel from 16k values (a batch-32 decode step's 576-wide
  // rows), at least two chunks per thread (each row entirely on one thread).
  template <typename F>
  void ForRows(int n, int k, const F& f) {
    const int64_t per_thread = CeilDiv(n, 2 * static_cast<int64_t>(pool_.size()));
    const int64_t grain = std::max<int64_t>(1, std::min<int64_t>(8192 / std::max(k, 1), per_thread));
    Run(n, grain, static_cast<int64_t>(n) * k >= 16384, f);
  }

  template <typename F>
  void Run(int64_t n, int64_t grain, bool parallel, const F& f) {
    if (n <= 0) return;
    if (!parallel || pool_.size() == 1) {
      f(0, n);
      return;
    }
    const auto thunk = [&f](int64_t b, int64_t e) { f(b, e); };
    pool_.ParallelFor(n, grain, thunk);
  }

  ThreadPool& pool_;
  const AtomKernelTable* k_;
  CpuIsa isa_;
  std::string name_;
  // MatMul workspaces (see MatMulPlan), grown and reused.
  std::vector<int8_t> xq_, xo_;
  std::vector<float> scales_t_, so_;
  std::vector<int32_t> corr_t_, sums_;
  std::vector<cpu::quant::RowBlockView> row_block_views_;
};

}  // namespace

std::unique_ptr<AtomKernels> CreateCpuAtomKernelsWithIsa(ThreadPool* pool, CpuIsa isa) {
  if (pool == nullptr || !CpuSupports(isa)) return nullptr;
  return std::make_unique<CpuAtomKernels>(pool, isa);
}

std::unique_ptr<AtomKernels> CreateCpuAtomKernels(ThreadPool* pool) {
  return CreateCpuAtomKernelsWithIsa(pool, BestCpuIsa());
}

}  // namespace loom::kernels::quant
