#include "models/tp/tp_weights.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/llama/llama_weights.h"

namespace loom {
namespace {

// Rows [r0, r0 + n) of w: a view.
kernels::WeightMatrix RowSlice(const kernels::WeightMatrix& w, int64_t r0, int64_t n) {
  kernels::WeightMatrix s = w;
  s.rows = n;
  s.data = w.data + static_cast<size_t>(r0) * w.row_bytes;
  return s;
}

// Columns [c0, c0 + n) of every row of w, copied into `owned`. REQUIRES: c0 and n are
// multiples of the dtype's block (checked by CheckTensorParallelSplit).
kernels::WeightMatrix ColumnSlice(const kernels::WeightMatrix& w, int64_t c0, int64_t n,
                                  std::vector<std::vector<uint8_t>>* owned) {
  const size_t offset = *DTypeRowBytes(w.dtype, c0);
  const size_t row_bytes = *DTypeRowBytes(w.dtype, n);
  std::vector<uint8_t> buf(row_bytes * static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    std::memcpy(buf.data() + r * row_bytes, w.data + r * w.row_bytes + offset, row_bytes);
  }
  kernels::WeightMatrix s = w;
  s.cols = n;
  s.row_bytes = row_bytes;
  s.data = buf.data();
  owned->push_back(std::move(buf));  // the heap block (and s.data) stays put
  return s;
}

}  // namespace

absl::Status CheckTensorParallelSplit(const LlamaConfig& c, int world, DType o_dtype,
                                      DType down_dtype) {
  if (world < 1 || world > 1024) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor parallel: world size %d outside [1, 1024]", world));
  }
  std::vector<std::string> bad;
  auto divides = [&](const char* what, int64_t v) {
    if (v % world != 0) bad.push_back(absl::StrFormat("%s %d", what, v));
  };
  divides("n_heads", c.n_heads);
  divides("n_kv_heads", c.n_kv_heads);
  divides("intermediate", c.intermediate);
  divides("vocab_size", c.vocab_size);
  if (bad.empty()) {
    const int64_t o_in = int64_t{c.n_heads} / world * c.head_dim;
    const int64_t down_in = c.intermediate / world;
    if (!DTypeRowBytes(o_dtype, o_in)) {
      bad.push_back(absl::StrFormat("attn_output per-rank input width %d (%s blocks of %d)",
                                    o_in, DTypeName(o_dtype), DTypeBlockElems(o_dtype)));
    }
    if (!DTypeRowBytes(down_dtype, down_in)) {
      bad.push_back(absl::StrFormat("ffn_down per-rank input width %d (%s blocks of %d)",
                                    down_in, DTypeName(down_dtype),
                                    DTypeBlockElems(down_dtype)));
    }
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "tensor parallel: %d ranks cannot split %s: %s", world, c.name.empty() ? "the model"
                                                                            : c.name,
      absl::StrJoin(bad, ", ")));
}

LlamaConfig RankConfig(const LlamaConfig& c, int world) {
  LlamaConfig r = c;
  r.n_heads = c.n_heads / world;
  r.n_kv_heads = c.n_kv_heads / world;
  r.intermediate = c.intermediate / world;
  return r;
}

absl::StatusOr<TpShard> TpShard::Cut(const ModelSource& src, int rank, int world) {
  absl::StatusOr<LlamaWeights> full = LlamaWeights::Bind(src);
  if (!full.ok()) return full.status();
  const LlamaConfig& c = src.config();
  for (const LlamaLayerWeights& L : full->layers) {  // each layer's dtypes may differ
    if (absl::Status s = CheckTensorParallelSplit(c, world, L.o.dtype, L.down.dtype);
        !s.ok()) {
      return s;
    }
  }
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor parallel: rank %d outside [0, %d)", rank, world));
  }
  const int64_t qd = int64_t{c.n_heads} * c.head_dim / world;
  const int64_t kvd = int64_t{c.n_kv_heads} * c.head_dim / world;
  const int64_t ff = c.intermediate / world;
  const int64_t vs = c.vocab_size / world;
  TpShard s;
  s.rank = rank;
  s.world = world;
  s.token_embd = full->token_embd;
  s.output = RowSlice(full->output, rank * vs, vs);
  s.output_norm = full->output_norm;
  s.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const LlamaLayerWeights& F = full->layers[l];
    TpLayerShard& L = s.layers[l];
    L.q = RowSlice(F.q, rank * qd, qd);
    L.k = RowSlice(F.k, rank * kvd, kvd);
    L.v = RowSlice(F.v, rank * kvd, kvd);
    L.gate = RowSlice(F.gate, rank * ff, ff);
    L.up = RowSlice(F.up, rank * ff, ff);
    L.o = ColumnSlice(F.o, rank * qd, qd, &s.owned);
    L.down = ColumnSlice(F.down, rank * ff, ff, &s.owned);
    L.attn_norm = F.attn_norm;
    L.ffn_norm = F.ffn_norm;
  }
  return s;
}

}  // namespace loom
