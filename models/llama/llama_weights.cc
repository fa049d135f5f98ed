#include "models/llama/llama_weights.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"

namespace loom {
namespace {

absl::StatusOr<kernels::WeightMatrix> Matrix(const ModelSource& src, const std::string& name,
                                             int64_t rows, int64_t cols) {
  absl::StatusOr<const WeightTensor*> t = src.Tensor(name);
  if (!t.ok()) return t.status();
  const WeightTensor& w = **t;
  if (w.shape.size() != 2 || w.shape[0] != rows || w.shape[1] != cols) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor %s has shape [%s], expected [%d, %d]", src.path(), name,
        absl::StrJoin(w.shape, ", "), rows, cols));
  }
  kernels::WeightMatrix m;
  m.dtype = w.dtype;
  m.rows = rows;
  m.cols = cols;
  m.data = w.data;
  m.row_bytes = w.nbytes / rows;
  return m;
}

absl::StatusOr<std::vector<float>> Vector(const ModelSource& src, const std::string& name,
                                          int64_t n) {
  absl::StatusOr<const WeightTensor*> t = src.Tensor(name);
  if (!t.ok()) return t.status();
  const WeightTensor& w = **t;
  if (w.shape.size() != 1 || w.shape[0] != n || DTypeIsQuantized(w.dtype)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor %s has shape [%s] type %s, expected float [%d]", src.path(), name,
        absl::StrJoin(w.shape, ", "), DTypeName(w.dtype), n));
  }
  std::vector<float> v(n);
  DequantizeRow(w.dtype, w.data, v.data(), n);
  return v;
}

}  // namespace

absl::StatusOr<LlamaWeights> LlamaWeights::Bind(const ModelSource& src) {
  const LlamaConfig& c = src.config();
  if (absl::Status s = c.Validate(); !s.ok()) return s;
  const int64_t h = c.hidden, qd = int64_t{c.n_heads} * c.head_dim,
                kvd = int64_t{c.n_kv_heads} * c.head_dim, ff = c.intermediate;
  LlamaWeights w;
#define LOOM_ASSIGN(lhs, expr)        \
  {                                   \
    auto r = (expr);                  \
    if (!r.ok()) return r.status();   \
    lhs = *std::move(r);              \
  }
  LOOM_ASSIGN(w.token_embd, Matrix(src, "token_embd.weight", c.vocab_size, h));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    LOOM_ASSIGN(w.output, Matrix(src, "output.weight", c.vocab_size, h));
  }
  LOOM_ASSIGN(w.output_norm, Vector(src, "output_norm.weight", h));
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    LlamaLayerWeights& L = w.layers[l];
    LOOM_ASSIGN(L.q, Matrix(src, p + "attn_q.weight", qd, h));
    LOOM_ASSIGN(L.k, Matrix(src, p + "attn_k.weight", kvd, h));
    LOOM_ASSIGN(L.v, Matrix(src, p + "attn_v.weight", kvd, h));
    LOOM_ASSIGN(L.o, Matrix(src, p + "attn_output.weight", h, qd));
    LOOM_ASSIGN(L.gate, Matrix(src, p + "ffn_gate.weight", ff, h));
    LOOM_ASSIGN(L.up, Matrix(src, p + "ffn_up.weight", ff, h));
    LOOM_ASSIGN(L.down, Matrix(src, p + "ffn_down.weight", h, ff));
    LOOM_ASSIGN(L.attn_norm, Vector(src, p + "attn_norm.weight", h));
    LOOM_ASSIGN(L.ffn_norm, Vector(src, p + "ffn_norm.weight", h));
  }
#undef LOOM_ASSIGN
  return w;
}

}  // namespace loom
