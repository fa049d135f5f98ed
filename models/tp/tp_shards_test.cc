// Sharding of weights, adapters and KV caches for tensor parallelism, checked element by
// element against the unsplit tensors.
#include <cstring>

#include "gtest/gtest.h"
#include "models/llama/llama_weights.h"
#include "models/tp/synthetic_model.h"
#include "models/tp/tp_adapter.h"
#include "models/tp/tp_kv_cache.h"
#include "models/tp/tp_weights.h"

namespace loom {
namespace {

LlamaConfig Config() {
  LlamaConfig c;
  c.name = "synthetic";
  c.vocab_size = 256;
  c.hidden = 64;
  c.intermediate = 128;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 32;
  c.max_context = 64;
  return c;
}

LlamaConfig SmolLm2Numbers() {
  LlamaConfig c;
  c.name = "SmolLM2-135M";
  c.vocab_size = 49152;
  c.hidden = 576;
  c.intermediate = 1536;
  c.n_layers = 30;
  c.n_heads = 9;
  c.n_kv_heads = 3;
  c.head_dim = 64;
  return c;
}

std::vector<float> Row(const kernels::WeightMatrix& w, int64_t r) {
  std::vector<float> v(w.cols);
  DequantizeRow(w.dtype, w.data + r * w.row_bytes, v.data(), w.cols);
  return v;
}

TEST(TpSplitTest, SmolLm2SplitsInThreeOnly) {
  const LlamaConfig c = SmolLm2Numbers();
  EXPECT_TRUE(CheckTensorParallelSplit(c, 1, DType::kQ4_1, DType::kQ4_1).ok());
  EXPECT_TRUE(CheckTensorParallelSplit(c, 3, DType::kQ4_1, DType::kQ4_1).ok());
  const absl::Status two = CheckTensorParallelSplit(c, 2, DType::kQ4_1, DType::kQ4_1);
  EXPECT_EQ(two.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(two.message().find("n_heads 9, n_kv_heads 3"), std::string::npos) << two;
  const absl::Status nine = CheckTensorParallelSplit(c, 9, DType::kQ4_1, DType::kQ4_1);
  EXPECT_NE(nine.message().find("n_kv_heads 3, intermediate 1536"), std::string::npos) << nine;
  EXPECT_EQ(CheckTensorParallelSplit(c, 0, DType::kF32, DType::kF32).code(),
            absl::StatusCode::kInvalidArgument);
}

// 6 heads of 16 over 2 ranks: o's per-rank input is 48 wide, not whole 32-blocks.
TEST(TpSplitTest, QuantizedRowParallelSlicesMustBeWholeBlocks) {
  LlamaConfig c = Config();
  c.n_heads = 6;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.hidden = 96;
  EXPECT_TRUE(CheckTensorParallelSplit(c, 2, DType::kF32, DType::kQ8_0).ok());
  const absl::Status s = CheckTensorParallelSplit(c, 2, DType::kQ4_1, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("attn_output per-rank input width 48"), std::string::npos) << s;
}

TEST(TpShardTest, ShardsAreTheRightRowsAndColumns) {
  const LlamaConfig c = Config();
  for (DType dt : {DType::kF32, DType::kQ8_0}) {
    auto src = testing::SyntheticModel(c, dt, 3);
    auto full = LlamaWeights::Bind(*src);
    ASSERT_TRUE(full.ok()) << full.status();
    constexpr int kW = 2;
    const int64_t qd = c.n_heads * c.head_dim / kW, kvd = c.n_kv_heads * c.head_dim / kW,
                  ff = c.intermediate / kW, vs = c.vocab_size / kW;
    for (int r = 0; r < kW; ++r) {
      auto s = TpShard::Cut(*src, r, kW);
      ASSERT_TRUE(s.ok()) << s.status();
      for (int l = 0; l < c.n_layers; ++l) {
        const LlamaLayerWeights& F = full->layers[l];
        const TpLayerShard& L = s->layers[l];
        // Column-parallel: views of whole rows.
        EXPECT_EQ(L.q.rows, qd);
        EXPECT_EQ(L.q.data, F.q.data + r * qd * F.q.row_bytes);
        EXPECT_EQ(L.k.data, F.k.data + r * kvd * F.k.row_bytes);
        EXPECT_EQ(L.v.rows, kvd);
        EXPECT_EQ(L.gate.data, F.gate.data + r * ff * F.gate.row_bytes);
        EXPECT_EQ(L.up.rows, ff);
        // Row-parallel: the same values as the full rows' column range.
        ASSERT_EQ(L.o.cols, qd);
        ASSERT_EQ(L.down.cols, ff);
        for (int64_t i = 0; i < c.hidden; ++i) {
          const std::vector<float> fo = Row(F.o, i), so = Row(L.o, i);
          ASSERT_TRUE(std::equal(so.begin(), so.end(), fo.begin() + r * qd));
          const std::vector<float> fd = Row(F.down, i), sd = Row(L.down, i);
          ASSERT_TRUE(std::equal(sd.begin(), sd.end(), fd.begin() + r * ff));
        }
      }
      EXPECT_EQ(s->output.rows, vs);
      EXPECT_EQ(s->output.data, full->output.data + r * vs * full->output.row_bytes);
      EXPECT_EQ(s->token_embd.data, full->token_embd.data);
    }
    EXPECT_EQ(TpShard::Cut(*src, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(TpAdapterTest, ColumnParallelSplitsBRowsRowParallelSplitsAColumns) {
  const LlamaConfig c = Config();
  testing::RandomLoraAdapter full(c, 4, 0.5f, 9);
  constexpr int kW = 2;
  auto tp = TpAdapter::Create(&full, c, kW);
  ASSERT_TRUE(tp.ok()) << tp.status();
  EXPECT_EQ((*tp)->world(), kW);
  EXPECT_EQ((*tp)->Pair(1, Projection::kQ), full.Pair(1, Projection::kQ));
  const int64_t qd = c.n_heads * c.head_dim, ff = c.intermediate;
  for (int r = 0; r < kW; ++r) {
    const TpAdapterShard& s = (*tp)->shard(r);
    EXPECT_EQ(s.max_rank(), 4);
    const kernels::LoraPair* fq = full.Pair(1, Projection::kQ);
    const kernels::LoraPair* sq = s.Pair(1, Projection::kQ);
    ASSERT_NE(sq, nullptr);
    EXPECT_EQ(sq->a, fq->a);                                  // A replicated
    EXPECT_EQ(sq->b, fq->b + r * (qd / kW) * fq->rank);       // B rows of this rank
    EXPECT_EQ(sq->scale, fq->scale);
    const kernels::LoraPair* fk = full.Pair(0, Projection::kK);
    EXPECT_EQ(s.Pair(0, Projection::kK)->b, fk->b + r * (c.n_kv_heads * c.head_dim / kW) * 4);
    for (Projection p : {Projection::kO, Projection::kDown}) {
      const int64_t h_in = p == Projection::kO ? qd : ff, w_in = h_in / kW;
      const kernels::LoraPair* f = full.Pair(0, p);
      const kernels::LoraPair* sp = s.Pair(0, p);
      ASSERT_NE(sp, nullptr);
      EXPECT_EQ(sp->b, f->b);  // B replicated
      for (int k = 0; k < f->rank; ++k) {
        EXPECT_EQ(std::memcmp(sp->a + k * w_in, f->a + k * h_in + r * w_in, w_in * 2), 0);
      }
    }
  }
  EXPECT_EQ(TpAdapter::Create(&full, c, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TpKvCacheTest, RanksHoldTheirHeadsWithEqualPages) {
  const LlamaConfig c = Config();
  KvCacheOptions o;
  o.n_pages = 8;
  o.page_size = 4;
  auto kv = TpKvCache::Create(c, 2, o);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ((*kv)->rank(1)->layout().n_kv_heads, 1);
  const int32_t a = (*kv)->NewSequence(), b = (*kv)->NewSequence();
  ASSERT_TRUE((*kv)->Reserve(a, 9).ok());
  ASSERT_TRUE((*kv)->Reserve(b, 5).ok());
  (*kv)->Release(a);
  ASSERT_TRUE((*kv)->Reserve(b, 20).ok());
  EXPECT_EQ((*kv)->rank(0)->Pages(b), (*kv)->rank(1)->Pages(b));
  EXPECT_EQ((*kv)->rank(0)->Pages(b).size(), 5u);
  EXPECT_EQ((*kv)->Reserve(b, 64).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(TpKvCache::Create(c, 4, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
