#include "models/tp/synthetic_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace loom::testing {
namespace {

void QuantizeQ8_0(const float* x, int64_t n, BlockQ8_0* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    out[b].d = Fp32ToFp16(d);
    for (int j = 0; j < 32; ++j) {
      out[b].qs[j] = static_cast<int8_t>(d == 0.0f ? 0 : std::lround(x[b * 32 + j] / d));
    }
  }
}

class Builder {
 public:
  Builder(ModelSource* s, uint32_t seed) : s_(s), rng_(seed) {}

  void Add(const std::string& name, std::vector<int64_t> shape, DType dtype, float mean,
           float stddev) {
    const int64_t cols = shape.back();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    std::normal_distribution<float> d(mean, stddev);
    std::vector<float> f(static_cast<size_t>(rows * cols));
    for (float& v : f) v = d(rng_);
    std::vector<uint8_t> buf;
    if (dtype == DType::kQ8_0) {
      buf.resize(static_cast<size_t>(rows * cols / 32) * sizeof(BlockQ8_0));
      for (int64_t r = 0; r < rows; ++r) {
        QuantizeQ8_0(f.data() + r * cols, cols,
                     reinterpret_cast<BlockQ8_0*>(buf.data()) + r * (cols / 32));
      }
    } else {
      buf.resize(f.size() * sizeof(float));
      std::memcpy(buf.data(), f.data(), buf.size());
    }
    WeightTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data = buf.data();
    t.nbytes = buf.size();
    s_->owned_.push_back(std::move(buf));
    s_->tensors_[name] = t;
  }

 private:
  ModelSource* s_;
  std::mt19937 rng_;
};

}  // namespace

std::unique_ptr<ModelSource> SyntheticModel(const LlamaConfig& c, DType linear_dtype,
                                            uint32_t seed) {
  auto s = std::make_unique<ModelSource>();
  s->path_ = absl::StrCat("synthetic(seed=", seed, ")");
  s->config_ = c;
  Builder b(s.get(), seed);
  const int64_t h = c.hidden, qd = int64_t{c.n_heads} * c.head_dim,
                kvd = int64_t{c.n_kv_heads} * c.head_dim, ff = c.intermediate;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    b.Add(name, {out, in}, linear_dtype, 0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
  };
  b.Add("token_embd.weight", {c.vocab_size, h}, DType::kF32, 0.0f, 1.0f);
  if (!c.tied_embeddings) linear("output.weight", c.vocab_size, h);
  b.Add("output_norm.weight", {h}, DType::kF32, 1.0f, 0.1f);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    linear(p + "attn_q.weight", qd, h);
    linear(p + "attn_k.weight", kvd, h);
    linear(p + "attn_v.weight", kvd, h);
    linear(p + "attn_output.weight", h, qd);
    linear(p + "ffn_gate.weight", ff, h);
    linear(p + "ffn_up.weight", ff, h);
    linear(p + "ffn_down.weight", h, ff);
    b.Add(p + "attn_norm.weight", {h}, DType::kF32, 1.0f, 0.1f);
    b.Add(p + "ffn_norm.weight", {h}, DType::kF32, 1.0f, 0.1f);
  }
  return s;
}

std::unique_ptr<ModelSource> TruncatedF32Copy(const ModelSource& src, int n_layers) {
  auto s = std::make_unique<ModelSource>();
  s->path_ = absl::StrCat(src.path(), " (F32, first ", n_layers, " layers)");
  s->config_ = src.config();
  s->config_.n_layers = n_layers;
  s->vocab_ = src.vocabulary();
  for (const auto& [name, t] : src.tensors()) {
    int layer = -1;
    if (std::sscanf(name.c_str(), "blk.%d.", &layer) == 1 && layer >= n_layers) continue;
    const int64_t rows = t.rows(), cols = t.cols();
    std::vector<uint8_t> buf(static_cast<size_t>(rows * cols) * sizeof(float));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t.dtype, t.data + r * t.row_bytes(),
                    reinterpret_cast<float*>(buf.data()) + r * cols, cols);
    }
    WeightTensor w = t;
    w.dtype = DType::kF32;
    w.data = buf.data();
    w.nbytes = buf.size();
    s->owned_.push_back(std::move(buf));
    s->tensors_[name] = w;
  }
  return s;
}

RandomLoraAdapter::RandomLoraAdapter(const LlamaConfig& c, int rank, float scale,
                                     uint32_t seed)
    : rank_(rank) {
  std::mt19937 rng(seed);
  const int64_t h = c.hidden, qd = int64_t{c.n_heads} * c.head_dim,
                kvd = int64_t{c.n_kv_heads} * c.head_dim, ff = c.intermediate;
  const int64_t in[kNumProjections] = {h, h, h, qd, h, h, ff};
  const int64_t out[kNumProjections] = {qd, kvd, kvd, h, ff, ff, h};
  auto random_bf16 = [&](int64_t n, float stddev) {
    std::normal_distribution<float> d(0.0f, stddev);
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (uint16_t& x : v) x = Fp32ToBf16(d(rng));
    return v;
  };
  pairs_.resize(static_cast<size_t>(c.n_layers) * kNumProjections);
  for (int l = 0; l < c.n_layers; ++l) {
    for (int p = 0; p < kNumProjections; ++p) {
      kernels::LoraPair& q = pairs_[static_cast<size_t>(l) * kNumProjections + p];
      owned_.push_back(random_bf16(rank * in[p], 1.0f / std::sqrt(static_cast<float>(in[p]))));
      q.a = owned_.back().data();
      owned_.push_back(random_bf16(out[p] * rank, 1.0f));
      q.b = owned_.back().data();
      q.rank = rank;
      q.scale = scale;
    }
  }
}

}  // namespace loom::testing
