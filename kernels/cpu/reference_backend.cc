#include "kernels/cpu/reference_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/reference_kernels.h"
#include "kernels/kv_quant.h"

namespace loom::kernels {
namespace {

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }

  void PackActivations(DType wtype, const float* x, int n, int k,
                       ActivationPack* pack) override {
    pack->n = n;
    pack->k = k;
    pack->quantized = DTypeIsQuantized(wtype);
    if (pack->quantized) {
      const size_t need = static_cast<size_t>(n) * (k / 32);
      if (pack->q8.size() < need) pack->q8.resize(need);
      for (int i = 0; i < n; ++i) {
        QuantizeRowQ8(x + static_cast<size_t>(i) * k, k,
                      pack->q8.data() + static_cast<size_t>(i) * (k / 32));
      }
    } else {
      const size_t need = static_cast<size_t>(n) * k;
      if (pack->f32.size() < need) pack->f32.resize(need);
      if (need > 0) std::memcpy(pack->f32.data(), x, need * sizeof(float));
    }
  }

  void MatMul(const WeightMatrix& w, const ActivationPack& x, float* y) override {
    const int nb = x.k / 32;
    for (int i = 0; i < x.n; ++i) {
      for (int64_t r = 0; r < w.rows; ++r) {
        const uint8_t* wrow = w.data + r * w.row_bytes;
        y[static_cast<size_t>(i) * w.rows + r] =
            x.quantized
                ? ref::DotQ8(w.dtype, wrow, x.q8.data() + static_cast<size_t>(i) * nb, nb)
                : ref::DotFloat(w.dtype, wrow, x.f32.data() + static_cast<size_t>(i) * x.k,
                                x.k);
      }
    }
  }

  void RmsNorm(const float* x, const float* gamma, int n, int dim, float eps,
               float* y) override {
    for (int i = 0; i < n; ++i) {
      ref::RmsNormRow(x + static_cast<size_t>(i) * dim, gamma, dim, eps,
                      y + static_cast<size_t>(i) * dim);
    }
  }

  void SiluMul(const float* gate, const float* up, int64_t count, float* y) override {
    for (int64_t i = 0; i < count; ++i) y[i] = ref::SiluMul(gate[i], up[i]);
  }

  void Rope(float* x, const int32_t* positions, int n, int n_heads, int head_dim,
            float theta, bool adjacent_pairs) override {
    std::vector<float> c(head_dim / 2), s(head_dim / 2);
    for (int t = 0; t < n; ++t) {
      ref::RopeCosSin(positions[t], head_dim, theta, c.data(), s.data());
      for (int h = 0; h < n_heads; ++h) {
        ref::RopeHead(x + (static_cast<size_t>(t) * n_heads + h) * head_dim, c.data(),
                      s.data(), head_dim, adjacent_pairs);
      }
    }
  }

  void AppendKv(const KvLayout& layout, const AttentionBatch& batch, const float* k,
                const float* v, uint8_t* k_pool, uint8_t* v_pool) override {
    const int d = layout.head_dim;
    for (int t = 0; t < batch.n_tokens; ++t) {
      const int32_t* pages = batch.page_table + batch.page_indptr[batch.seq_of_token[t]];
      for (int h = 0; h < layout.n_kv_heads; ++h) {
        const size_t src = (static_cast<size_t>(t) * layout.n_kv_heads + h) * d;
        QuantizeKvRow(layout.dtype, k + src, d,
                      ref::KvRowMut(layout, k_pool, pages, batch.positions[t], h));
        QuantizeKvRow(layout.dtype, v + src, d,
                      ref::KvRowMut(layout, v_pool, pages, batch.positions[t], h));
      }
    }
  }

  void PagedAttention(const KvLayout& layout, const AttentionBatch& batch, const float* q,
                      int n_heads, const uint8_t* k_pool, const uint8_t* v_pool,
                      float* out) override {
    const int d = layout.head_dim;
    if (row_.size() < static_cast<size_t>(d)) row_.resize(d);
    for (int t = 0; t < batch.n_tokens; ++t) {
      const size_t need = static_cast<size_t>(batch.positions[t]) + 1;
      if (scratch_.size() < need) scratch_.resize(need);
      for (int h = 0; h < n_heads; ++h) {
        const size_t off = (static_cast<size_t>(t) * n_heads + h) * d;
        ref::AttentionHead(layout, batch, t, h, n_heads, q + off, k_pool, v_pool,
                           scratch_.data(), row_.data(), out + off);
      }
    }
  }

 private:
  std::vector<double> scratch_;
  std::vector<float> row_;
};

}  // namespace

std::unique_ptr<Backend> CreateReferenceBackend() {
  return std::make_unique<ReferenceBackend>();
}

}  // namespace loom::kernels
