// One rank's shard of a Llama model for Megatron-style tensor parallelism over W ranks.
//
// Rank r of W holds (qd = n_heads*head_dim, kvd = n_kv_heads*head_dim, ff = intermediate):
//   column-parallel (output rows split; whole heads): q rows [r*qd/W, (r+1)*qd/W),
//     k/v rows [r*kvd/W, ...), gate/up rows [r*ff/W, ...)  -- zero-copy views (a row slice
//     of a quantized matrix is whole rows of blocks);
//   row-parallel (input columns split): o [hidden, qd/W] columns [r*qd/W, ...), down
//     [hidden, ff/W] columns [r*ff/W, ...)  -- owned copies of those blocks of every row
//     (quantized types need the slice to be whole 32-element blocks);
//   vocab-parallel output: rows [r*vocab/W, ...) of output.weight (token_embd when tied);
//   replicated: token_embd (for the lookup) and the norms.
// Rank r's heads are global heads [r*n_heads/W, ...) and kv heads [r*n_kv_heads/W, ...);
// GQA groups stay whole because both counts divide by W.
#ifndef LOOM_MODELS_TP_TP_WEIGHTS_H_
#define LOOM_MODELS_TP_TP_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "models/model_config.h"
#include "models/weights/model_source.h"

namespace loom {

// OK if `world` ranks can split a model with config `c` whose o/down/output are stored as
// the given dtypes: W divides n_heads, n_kv_heads, intermediate and vocab_size, and the
// per-rank input width of o (qd/W) and down (ff/W) is a multiple of the dtype's block.
// Otherwise InvalidArgument naming every number that does not divide.
absl::Status CheckTensorParallelSplit(const LlamaConfig& c, int world, DType o_dtype,
                                      DType down_dtype);

// The config one rank sees: n_heads/W, n_kv_heads/W, intermediate/W (hidden, head_dim,
// vocab unchanged). Size a rank's PagedKvCache with it.
LlamaConfig RankConfig(const LlamaConfig& c, int world);

struct TpLayerShard {
  kernels::WeightMatrix q, k, v;  // [qd/W, hidden], [kvd/W, hidden]: views
  kernels::WeightMatrix gate, up;  // [ff/W, hidden]: views
  kernels::WeightMatrix o;         // [hidden, qd/W]: owned
  kernels::WeightMatrix down;      // [hidden, ff/W]: owned
  std::vector<float> attn_norm, ffn_norm;  // [hidden]
};

struct TpShard {
  int rank = 0;
  int world = 1;
  kernels::WeightMatrix token_embd;  // [vocab, hidden], full
  kernels::WeightMatrix output;      // [vocab/W, hidden]: view
  std::vector<float> output_norm;    // [hidden]
  std::vector<TpLayerShard> layers;
  std::vector<std::vector<uint8_t>> owned;  // bytes of the row-parallel shards

  // Shape-checks `src` (through LlamaWeights::Bind) and cuts rank `rank`'s shard. `src`
  // must outlive the result. REQUIRES nothing: bad splits are InvalidArgument.
  static absl::StatusOr<TpShard> Cut(const ModelSource& src, int rank, int world);
};

}  // namespace loom

#endif  // LOOM_MODELS_TP_TP_WEIGHTS_H_
