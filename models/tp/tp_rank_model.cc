#include "models/tp/tp_rank_model.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace loom {
namespace {

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

void AddInPlace(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

absl::Status TpRankModel::Check(const BatchPlan& plan, const PagedKvCache& kv) const {
  if (kv.layout().n_kv_heads != local_.n_kv_heads || kv.layout().head_dim != local_.head_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TP rank %d: KV cache has %d kv heads of %d, the rank needs %d of %d", rank(),
        kv.layout().n_kv_heads, kv.layout().head_dim, local_.n_kv_heads, local_.head_dim));
  }
  const std::vector<AdapterSegment>& segs = plan.adapter_segments();
  if (!segs.empty() && lora_ == nullptr) {
    return absl::FailedPreconditionError("TP forward: adapters requested but no LoRA kernels");
  }
  for (size_t s = 0; s < segs.size(); ++s) {
    const auto* a = dynamic_cast<const TpAdapter*>(segs[s].adapter);
    if (a == nullptr || a->world() != world()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "TP forward: adapter segment %d is not a TpAdapter split for %d ranks", s, world()));
    }
  }
  return absl::OkStatus();
}

absl::Status TpRankModel::Prepare(const BatchPlan& plan, const PagedKvCache& kv,
                                  TpWorkspace* ws) const {
  if (absl::Status s = Check(plan, kv); !s.ok()) return s;
  const std::vector<AdapterSegment>& segs = plan.adapter_segments();
  ws->seg_shards.resize(segs.size());
  for (size_t s = 0; s < segs.size(); ++s) {
    ws->seg_shards[s] = &static_cast<const TpAdapter*>(segs[s].adapter)->shard(rank());
  }
  const size_t nt = static_cast<size_t>(plan.n_tokens());
  const size_t m = plan.logit_tokens().size();
  Grow(ws->x, nt * config_.hidden);
  Grow(ws->xn, nt * config_.hidden);
  Grow(ws->q, nt * local_.n_heads * local_.head_dim);
  Grow(ws->attn, nt * local_.n_heads * local_.head_dim);
  Grow(ws->k, nt * local_.n_kv_heads * local_.head_dim);
  Grow(ws->v, nt * local_.n_kv_heads * local_.head_dim);
  Grow(ws->proj, nt * config_.hidden);
  Grow(ws->gate, nt * local_.intermediate);
  Grow(ws->up, nt * local_.intermediate);
  Grow(ws->last, m * config_.hidden);
  Grow(ws->logits_shard, m * shard_.output.rows);
  Grow(ws->gathered, m * shard_.output.rows * world());
  if (!segs.empty()) Grow(ws->lora_v, nt * static_cast<size_t>(plan.max_adapter_rank()));
  return absl::OkStatus();
}

void TpRankModel::ApplyLora(const BatchPlan& plan, int layer, Projection p, const float* x,
                            int h_in, int h_out, float* y, TpWorkspace* ws) const {
  const std::vector<AdapterSegment>& segments = plan.adapter_segments();
  if (segments.empty()) return;
  ws->lora_segs.resize(segments.size());
  bool any = false;
  for (size_t s = 0; s < segments.size(); ++s) {
    kernels::LoraSegment& seg = ws->lora_segs[s];
    seg.begin = segments[s].begin;
    seg.end = segments[s].end;
    seg.lora = ws->seg_shards[s]->Pair(layer, p);
    any |= seg.lora != nullptr;
  }
  if (!any) return;
  const int stride = plan.max_adapter_rank();
  const int n = static_cast<int>(ws->lora_segs.size());
  lora_->SgmvShrink(x, h_in, ws->lora_segs.data(), n, ws->lora_v.data(), stride);
  lora_->SgmvExpand(ws->lora_v.data(), stride, ws->lora_segs.data(), n, h_out, y);
}

absl::Status TpRankModel::Attention(int layer, const BatchPlan& plan, PagedKvCache* kv,
                                    TpWorkspace* ws) const {
  const LlamaConfig& c = config_;
  const TpLayerShard& L = shard_.layers[layer];
  const int n = plan.n_tokens();
  kernels::Backend& be = *backend_;
  const int qd = local_.n_heads * c.head_dim, kvd = local_.n_kv_heads * c.head_dim;
  be.RmsNorm(ws->x.data(), L.attn_norm.data(), n, c.hidden, c.rms_eps, ws->xn.data());
  be.PackActivations(L.q.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
  be.MatMul(L.q, ws->pack, ws->q.data());
  ApplyLora(plan, layer, Projection::kQ, ws->xn.data(), c.hidden, qd, ws->q.data(), ws);
  if (L.k.dtype != L.q.dtype) be.PackActivations(L.k.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
  be.MatMul(L.k, ws->pack, ws->k.data());
  ApplyLora(plan, layer, Projection::kK, ws->xn.data(), c.hidden, kvd, ws->k.data(), ws);
  if (L.v.dtype != L.k.dtype) be.PackActivations(L.v.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
  be.MatMul(L.v, ws->pack, ws->v.data());
  ApplyLora(plan, layer, Projection::kV, ws->xn.data(), c.hidden, kvd, ws->v.data(), ws);
  const bool adjacent = c.rope_layout == RopeLayout::kAdjacentPairs;
  be.Rope(ws->q.data(), plan.positions().data(), n, local_.n_heads, c.head_dim, c.rope_theta,
          adjacent);
  be.Rope(ws->k.data(), plan.positions().data(), n, local_.n_kv_heads, c.head_dim,
          c.rope_theta, adjacent);
  const kernels::AttentionBatch batch = plan.attention();
  be.AppendKv(kv->layout(), batch, ws->k.data(), ws->v.data(), kv->k_pool(layer),
              kv->v_pool(layer));
  be.PagedAttention(kv->layout(), batch, ws->q.data(), local_.n_heads, kv->k_pool(layer),
                    kv->v_pool(layer), ws->attn.data());
  be.PackActivations(L.o.dtype, ws->attn.data(), n, qd, &ws->pack);
  be.MatMul(L.o, ws->pack, ws->proj.data());
  ApplyLora(plan, layer, Projection::kO, ws->attn.data(), qd, c.hidden, ws->proj.data(), ws);
  const size_t count = static_cast<size_t>(n) * c.hidden;
  if (absl::Status s = comm_->AllReduceSum(ws->proj.data(), count); !s.ok()) return s;
  AddInPlace(ws->x.data(), ws->proj.data(), count);
  return absl::OkStatus();
}

absl::Status TpRankModel::FeedForward(int layer, const BatchPlan& plan,
                                      TpWorkspace* ws) const {
  const int n = plan.n_tokens();
  const LlamaConfig& c = config_;
  const int ff = local_.intermediate;
  const TpLayerShard& L = shard_.layers[layer];
  kernels::Backend& be = *backend_;
  be.RmsNorm(ws->x.data(), L.ffn_norm.data(), n, c.hidden, c.rms_eps, ws->xn.data());
  be.PackActivations(L.gate.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
  be.MatMul(L.gate, ws->pack, ws->gate.data());
  ApplyLora(plan, layer, Projection::kGate, ws->xn.data(), c.hidden, ff, ws->gate.data(), ws);
  if (L.up.dtype != L.gate.dtype) {
    be.PackActivations(L.up.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
  }
  be.MatMul(L.up, ws->pack, ws->up.data());
  ApplyLora(plan, layer, Projection::kUp, ws->xn.data(), c.hidden, ff, ws->up.data(), ws);
  be.SiluMul(ws->gate.data(), ws->up.data(), static_cast<int64_t>(n) * ff, ws->gate.data());
  be.PackActivations(L.down.dtype, ws->gate.data(), n, ff, &ws->pack);
  be.MatMul(L.down, ws->pack, ws->proj.data());
  ApplyLora(plan, layer, Projection::kDown, ws->gate.data(), ff, c.hidden, ws->proj.data(),
            ws);
  const size_t count = static_cast<size_t>(n) * c.hidden;
  if (absl::Status s = comm_->AllReduceSum(ws->proj.data(), count); !s.ok()) return s;
  AddInPlace(ws->x.data(), ws->proj.data(), count);
  return absl::OkStatus();
}

absl::Status TpRankModel::Logits(const BatchPlan& plan, TpWorkspace* ws, float* logits) const {
  const LlamaConfig& c = config_;
  const auto& rows = plan.logit_tokens();
  const int m = static_cast<int>(rows.size());
  for (int i = 0; i < m; ++i) {
    std::copy_n(ws->x.data() + static_cast<size_t>(rows[i]) * c.hidden, c.hidden,
                ws->last.data() + static_cast<size_t>(i) * c.hidden);
  }
  backend_->RmsNorm(ws->last.data(), shard_.output_norm.data(), m, c.hidden, c.rms_eps,
                    ws->last.data());
  backend_->PackActivations(shard_.output.dtype, ws->last.data(), m, c.hidden, &ws->pack);
  const size_t vs = static_cast<size_t>(shard_.output.rows);
  backend_->MatMul(shard_.output, ws->pack, ws->logits_shard.data());
  if (absl::Status s = comm_->AllGather(ws->logits_shard.data(), m * vs, ws->gathered.data());
      !s.ok()) {
    return s;
  }
  if (logits == nullptr) return absl::OkStatus();
  // gathered [W][m][vs] -> logits [m][W * vs]
  for (int r = 0; r < world(); ++r) {
    for (int i = 0; i < m; ++i) {
      std::copy_n(ws->gathered.data() + (static_cast<size_t>(r) * m + i) * vs, vs,
                  logits + static_cast<size_t>(i) * c.vocab_size + r * vs);
    }
  }
  return absl::OkStatus();
}

absl::Status TpRankModel::Forward(const BatchPlan& plan, PagedKvCache* kv, TpWorkspace* ws,
                                  float* logits) const {
  if (plan.n_tokens() == 0) return absl::OkStatus();
  if (absl::Status s = Prepare(plan, *kv, ws); !s.ok()) return s;
  const int n = plan.n_tokens();
  const kernels::WeightMatrix& e = shard_.token_embd;
  for (int t = 0; t < n; ++t) {
    DequantizeRow(e.dtype, e.data + e.row_bytes * plan.tokens()[t],
                  ws->x.data() + static_cast<size_t>(t) * e.cols, e.cols);
  }
  for (int l = 0; l < config_.n_layers; ++l) {
    if (absl::Status s = Attention(l, plan, kv, ws); !s.ok()) return s;
    if (absl::Status s = FeedForward(l, plan, ws); !s.ok()) return s;
  }
  if (plan.logit_tokens().empty()) return absl::OkStatus();
  return Logits(plan, ws, logits);
}

}  // namespace loom
