#include "models/llama/llama_model.h"

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

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(
    std::unique_ptr<ModelSource> source, kernels::Backend* backend, kernels::LoraOps* lora) {
  if (source == nullptr || backend == nullptr) {
    return absl::InvalidArgumentError("LlamaModel: source and backend are required");
  }
  absl::StatusOr<LlamaWeights> w = LlamaWeights::Bind(*source);
  if (!w.ok()) return w.status();
  return std::unique_ptr<LlamaModel>(
      new LlamaModel(std::move(source), *std::move(w), backend, lora));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::CreateRotated(
    std::unique_ptr<ModelSource> source, std::shared_ptr<const ModelRotation> rotation,
    kernels::Backend* backend, kernels::LoraOps* lora) {
  if (rotation == nullptr) return absl::InvalidArgumentError("LlamaModel: null rotation");
  if (source == nullptr) return absl::InvalidArgumentError("LlamaModel: source is required");
  if (rotation->hidden() != source->config().hidden) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "LlamaModel: the rotation is for hidden %d, the model has %d", rotation->hidden(),
        source->config().hidden));
  }
  absl::StatusOr<std::unique_ptr<LlamaModel>> m = Create(std::move(source), backend, lora);
  if (!m.ok()) return m.status();
  (*m)->rotation_ = std::move(rotation);
  return m;
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::CreateQuantized(
    std::unique_ptr<ModelSource> source, QuantizedWeights quantized, kernels::Backend* backend,
    kernels::quant::AtomKernels* atom, kernels::LoraOps* lora) {
  if (atom == nullptr) {
    return absl::InvalidArgumentError("LlamaModel: the quantized mode needs Atom kernels");
  }
  if (source == nullptr) return absl::InvalidArgumentError("LlamaModel: source is required");
  if (absl::Status s = quantized.Validate(source->config()); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<LlamaModel>> m = Create(std::move(source), backend, lora);
  if (!m.ok()) return m.status();
  (*m)->rotation_ = quantized.rotation;
  (*m)->quant_ = std::move(quantized);
  (*m)->atom_ = atom;
  (*m)->PrepareQuantizedLinears();
  return m;
}

absl::Status LlamaModel::UseInt8Head() {
  if (!quant_) {
    return absl::FailedPreconditionError("the INT8 output head needs a quantized model");
  }
  absl::StatusOr<QuantizedHead> h = QuantizeOutputHead(weights_.output);
  if (!h.ok()) return h.status();
  head_ = *std::move(h);
  head_prepared_ = atom_->Prepare(head_->weight.view());
  return absl::OkStatus();
}

void LlamaModel::PrepareQuantizedLinears() {
  for (QuantizedLayerWeights& L : quant_->layers) {
    for (kernels::quant::AtomWeightView* v : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
      prepared_.push_back(atom_->Prepare(*v));
      v->prepared = prepared_.back().get();
    }
  }
}

void LlamaModel::Embed(const BatchPlan& plan, float* x) const {
  const kernels::WeightMatrix& e = weights_.token_embd;
  for (int t = 0; t < plan.n_tokens(); ++t) {
    DequantizeRow(e.dtype, e.data + e.row_bytes * plan.tokens()[t], x + t * e.cols, e.cols);
  }
}

void LlamaModel::RotateResidual(float* x, int n, bool transpose, ForwardWorkspace* ws) const {
  StepTimer timer(ws->profile, StepOp::kRotate);
  if (atom_ == nullptr) {
    rotation_->RotateResidual(x, n, transpose);
    return;
  }
  const std::vector<int32_t>& order = rotation_->orders().residual;
  const kernels::HadamardTransform& t = rotation_->residual();
  if (order.empty()) {
    atom_->HadamardRows(t, x, n, transpose);  // R = T
    return;
  }
  // R = Pᵀ blockdiag(T, I) P: gather the rotated channels, the fast kernel, scatter back.
  const int h = config().hidden, m = t.n();
  Grow(ws->rotated, static_cast<size_t>(n) * m);
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < m; ++j) ws->rotated[static_cast<size_t>(r) * m + j] = x[static_cast<size_t>(r) * h + order[j]];
  }
  atom_->HadamardRows(t, ws->rotated.data(), n, transpose);
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < m; ++j) x[static_cast<size_t>(r) * h + order[j]] = ws->rotated[static_cast<size_t>(r) * m + j];
  }
}

const float* LlamaModel::NormScale(const std::vector<float>& stored) const {
  return rotation_ ? rotation_->unit_norm().data() : stored.data();
}

void LlamaModel::ApplyLora(const BatchPlan& plan, int layer, Projection p, const float* x,
                           int h_in, int h_out, float* y, ForwardWorkspace* ws) const {
  const std::vector<AdapterSegment>& segments = plan.adapter_segments();
  if (segments.empty()) return;
  StepTimer timer(ws->profile, StepOp::kLora);
  ws->lora_segs.resize(segments.size());
  bool any = false;
  for (size_t s = 0; s < segments.size(); ++s) {
    kernels::LoraSegment& seg = ws->lora_segs[s];
    seg.begin = segments[s].begin;
    seg.end = segments[s].end;
    seg.lora = segments[s].adapter->Pair(layer, p);
    any |= seg.lora != nullptr;
  }
  if (!any) return;
  const int stride = plan.max_adapter_rank();
  const int n = static_cast<int>(ws->lora_segs.size());
  lora_->SgmvShrink(x, h_in, ws->lora_segs.data(), n, ws->lora_v.data(), stride);
  lora_->SgmvExpand(ws->lora_v.data(), stride, ws->lora_segs.data(), n, h_out, y);
}

void LlamaModel::RopeAndAttend(int layer, const BatchPlan& plan, PagedKvCache* kv,
                               ForwardWorkspace* ws) const {
  const LlamaConfig& c = config();
  const int n = plan.n_tokens();
  kernels::Backend& be = *backend_;
  {
    StepTimer timer(ws->profile, StepOp::kRope);
    const bool adjacent = c.rope_layout == RopeLayout::kAdjacentPairs;
    be.Rope(ws->q.data(), plan.positions().data(), n, c.n_heads, c.head_dim, c.rope_theta,
            adjacent);
    be.Rope(ws->k.data(), plan.positions().data(), n, c.n_kv_heads, c.head_dim, c.rope_theta,
            adjacent);
  }
  const kernels::AttentionBatch batch = plan.attention();
  {
    StepTimer timer(ws->profile, StepOp::kKvAppend);
    be.AppendKv(kv->layout(), batch, ws->k.data(), ws->v.data(), kv->k_pool(layer),
                kv->v_pool(layer));
  }
  StepTimer timer(ws->profile, StepOp::kAttention);
  be.PagedAttention(kv->layout(), batch, ws->q.data(), c.n_heads, kv->k_pool(layer),
                    kv->v_pool(layer), ws->attn.data());
}

void LlamaModel::AddResidual(int n, ForwardWorkspace* ws) const {
  StepTimer timer(ws->profile, StepOp::kResidual);
  AddInPlace(ws->x.data(), ws->proj.data(), static_cast<size_t>(n) * config().hidden);
}

void LlamaModel::Attention(int layer, const BatchPlan& plan, PagedKvCache* kv,
                           ForwardWorkspace* ws) const {
  const LlamaConfig& c = config();
  const LlamaLayerWeights& L = weights_.layers[layer];
  const int n = plan.n_tokens();
  kernels::Backend& be = *backend_;
  {
    StepTimer timer(ws->profile, StepOp::kNorm);
    be.RmsNorm(ws->x.data(), NormScale(L.attn_norm), n, c.hidden, c.rms_eps, ws->xn.data());
    if (ws->tap) ws->tap->Observe(layer, TapPoint::kAttnNorm, ws->xn.data(), n, c.hidden);
    be.PackActivations(L.q.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
  }
  const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
  {
    StepTimer timer(ws->profile, StepOp::kQkv);
    be.MatMul(L.q, ws->pack, ws->q.data());
  }
  ApplyLora(plan, layer, Projection::kQ, ws->xn.data(), c.hidden, qd, ws->q.data(), ws);
  {
    StepTimer timer(ws->profile, StepOp::kQkv);
    if (L.k.dtype != L.q.dtype) {
      be.PackActivations(L.k.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
    }
    be.MatMul(L.k, ws->pack, ws->k.data());
  }
  ApplyLora(plan, layer, Projection::kK, ws->xn.data(), c.hidden, kvd, ws->k.data(), ws);
  {
    StepTimer timer(ws->profile, StepOp::kQkv);
    if (L.v.dtype != L.k.dtype) {
      be.PackActivations(L.v.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
    }
    be.MatMul(L.v, ws->pack, ws->v.data());
  }
  ApplyLora(plan, layer, Projection::kV, ws->xn.data(), c.hidden, kvd, ws->v.data(), ws);
  RopeAndAttend(layer, plan, kv, ws);
  if (rotation_ && rotation_->attn_out()) {
    StepTimer timer(ws->profile, StepOp::kOQuant);
    rotation_->RotateAttnOut(layer, ws->attn.data(), n);
  }
  if (ws->tap) ws->tap->Observe(layer, TapPoint::kAttnOut, ws->attn.data(), n, qd);
  {
    StepTimer timer(ws->profile, StepOp::kO);
    be.PackActivations(L.o.dtype, ws->attn.data(), n, qd, &ws->pack);
    be.MatMul(L.o, ws->pack, ws->proj.data());
  }
  ApplyLora(plan, layer, Projection::kO, ws->attn.data(), qd, c.hidden, ws->proj.data(), ws);
  AddResidual(n, ws);
}

void LlamaModel::FeedForward(int layer, const BatchPlan& plan, ForwardWorkspace* ws) const {
  const int n = plan.n_tokens();
  const LlamaConfig& c = config();
  const LlamaLayerWeights& L = weights_.layers[layer];
  kernels::Backend& be = *backend_;
  {
    StepTimer timer(ws->profile, StepOp::kNorm);
    be.RmsNorm(ws->x.data(), NormScale(L.ffn_norm), n, c.hidden, c.rms_eps, ws->xn.data());
    if (ws->tap) ws->tap->Observe(layer, TapPoint::kFfnNorm, ws->xn.data(), n, c.hidden);
    be.PackActivations(L.gate.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
  }
  {
    StepTimer timer(ws->profile, StepOp::kGateUp);
    be.MatMul(L.gate, ws->pack, ws->gate.data());
  }
  ApplyLora(plan, layer, Projection::kGate, ws->xn.data(), c.hidden, c.intermediate,
            ws->gate.data(), ws);
  {
    StepTimer timer(ws->profile, StepOp::kGateUp);
    if (L.up.dtype != L.gate.dtype) {
      be.PackActivations(L.up.dtype, ws->xn.data(), n, c.hidden, &ws->pack);
    }
    be.MatMul(L.up, ws->pack, ws->up.data());
  }
  ApplyLora(plan, layer, Projection::kUp, ws->xn.data(), c.hidden, c.intermediate,
            ws->up.data(), ws);
  {
    StepTimer timer(ws->profile, StepOp::kSiluMul);
    const size_t ff = static_cast<size_t>(n) * c.intermediate;
    be.SiluMul(ws->gate.data(), ws->up.data(), ff, ws->gate.data());
    if (rotation_ && rotation_->silu_mul()) rotation_->RotateSiluMul(layer, ws->gate.data(), n);
    if (ws->tap) ws->tap->Observe(layer, TapPoint::kSiluMul, ws->gate.data(), n, c.intermediate);
    be.PackActivations(L.down.dtype, ws->gate.data(), n, c.intermediate, &ws->pack);
  }
  {
    StepTimer timer(ws->profile, StepOp::kDown);
    be.MatMul(L.down, ws->pack, ws->proj.data());
  }
  ApplyLora(plan, layer, Projection::kDown, ws->gate.data(), c.intermediate, c.hidden,
            ws->proj.data(), ws);
  AddResidual(n, ws);
}

void LlamaModel::QuantAttention(int layer, const BatchPlan& plan, PagedKvCache* kv,
                                ForwardWorkspace* ws) const {
  const LlamaConfig& c = config();
  const LlamaLayerWeights& L = weights_.layers[layer];
  const QuantizedLayerWeights& Q = quant_->layers[layer];
  const int n = plan.n_tokens();
  kernels::quant::AtomKernels& atom = *atom_;
  {
    // xn = permute(RMSNorm(x)) in attn_norm order: q/k/v's quantized input and LoRA's input.
    StepTimer timer(ws->profile, StepOp::kNorm);
    atom.RmsNormQuantize(ws->x.data(), NormScale(L.attn_norm), n, c.rms_eps, Q.attn_norm_perm,
                         Q.q.spec, &ws->atom, ws->xn.data());
  }
  const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
  {
    StepTimer timer(ws->profile, StepOp::kQkv);
    const kernels::quant::AtomWeightView* w[3] = {&Q.q, &Q.k, &Q.v};
    float* y[3] = {ws->q.data(), ws->k.data(), ws->v.data()};
    atom.MatMulMany(w, 3, ws->atom, y);
  }
  ApplyLora(plan, layer, Projection::kQ, ws->xn.data(), c.hidden, qd, ws->q.data(), ws);
  ApplyLora(plan, layer, Projection::kK, ws->xn.data(), c.hidden, kvd, ws->k.data(), ws);
  ApplyLora(plan, layer, Projection::kV, ws->xn.data(), c.hidden, kvd, ws->v.data(), ws);
  RopeAndAttend(layer, plan, kv, ws);
  {
    StepTimer timer(ws->profile, StepOp::kOQuant);
    if (rotation_ && rotation_->attn_out()) {
      atom.HadamardQuantize(ws->attn.data(), n, *rotation_->attn_out(), Q.attn_out_perm, Q.o.spec,
                            &ws->atom, ws->xp.data());
    } else {
      atom.Quantize(ws->attn.data(), n, Q.attn_out_perm, Q.o.spec, &ws->atom, ws->xp.data());
    }
  }
  {
    StepTimer timer(ws->profile, StepOp::kO);
    atom.MatMul(Q.o, ws->atom, ws->proj.data());
  }
  ApplyLora(plan, layer, Projection::kO, ws->xp.data(), qd, c.hidden, ws->proj.data(), ws);
  AddResidual(n, ws);
}

void LlamaModel::QuantFeedForward(int layer, const BatchPlan& plan, ForwardWorkspace* ws) const {
  const int n = plan.n_tokens();
  const LlamaConfig& c = config();
  const LlamaLayerWeights& L = weights_.layers[layer];
  const QuantizedLayerWeights& Q = quant_->layers[layer];
  kernels::quant::AtomKernels& atom = *atom_;
  {
    StepTimer timer(ws->profile, StepOp::kNorm);
    atom.RmsNormQuantize(ws->x.data(), NormScale(L.ffn_norm), n, c.rms_eps, Q.ffn_norm_perm,
                         Q.gate.spec, &ws->atom, ws->xn.data());
  }
  // gate/up rows come out in silu_mul.perm order (so do the permuted adapters' B rows),
  // or in the original order when the rotation applies M_d (then silu_mul.perm after it).
  {
    StepTimer timer(ws->profile, StepOp::kGateUp);
    const kernels::quant::AtomWeightView* w[2] = {&Q.gate, &Q.up};
    float* y[2] = {ws->gate.data(), ws->up.data()};
    atom.MatMulMany(w, 2, ws->atom, y);
  }
  ApplyLora(plan, layer, Projection::kGate, ws->xn.data(), c.hidden, c.intermediate,
            ws->gate.data(), ws);
  ApplyLora(plan, layer, Projection::kUp, ws->xn.data(), c.hidden, c.intermediate,
            ws->up.data(), ws);
  {
    StepTimer timer(ws->profile, StepOp::kSiluMul);
    if (rotation_ && rotation_->silu_mul()) {
      atom.SiluMulHadamardQuantize(ws->gate.data(), ws->up.data(), n, *rotation_->silu_mul(),
                                   Q.silu_mul_perm, Q.down.spec, &ws->atom, ws->ffh.data());
    } else {
      atom.SiluMulQuantize(ws->gate.data(), ws->up.data(), n, Q.down.spec, &ws->atom,
                           ws->ffh.data());
    }
  }
  {
    StepTimer timer(ws->profile, StepOp::kDown);
    atom.MatMul(Q.down, ws->atom, ws->proj.data());
  }
  ApplyLora(plan, layer, Projection::kDown, ws->ffh.data(), c.intermediate, c.hidden,
            ws->proj.data(), ws);
  AddResidual(n, ws);
}

absl::Status LlamaModel::Forward(const BatchPlan& plan, PagedKvCache* kv, ForwardWorkspace* ws,
                                 float* logits) const {
  const LlamaConfig& c = config();
  const int n = plan.n_tokens();
  if (n == 0) return absl::OkStatus();
  if (kv->layout().n_kv_heads != c.n_kv_heads || kv->layout().head_dim != c.head_dim) {
    return absl::InvalidArgumentError("Forward: KV cache geometry does not match the model");
  }
  if (ws->profile) ++ws->profile->steps;
  const size_t nt = static_cast<size_t>(n);
  Grow(ws->x, nt * c.hidden);
  Grow(ws->xn, nt * c.hidden);
  Grow(ws->q, nt * c.n_heads * c.head_dim);
  Grow(ws->k, nt * c.n_kv_heads * c.head_dim);
  Grow(ws->v, nt * c.n_kv_heads * c.head_dim);
  Grow(ws->attn, nt * c.n_heads * c.head_dim);
  Grow(ws->proj, nt * c.hidden);
  Grow(ws->gate, nt * c.intermediate);
  Grow(ws->up, nt * c.intermediate);
  if (quant_) {
    Grow(ws->xp, nt * c.n_heads * c.head_dim);
    Grow(ws->ffh, nt * c.intermediate);
  }
  if (!plan.adapter_segments().empty()) {
    if (lora_ == nullptr) {
      return absl::FailedPreconditionError("Forward: adapters requested but no LoRA kernels");
    }
    Grow(ws->lora_v, nt * static_cast<size_t>(plan.max_adapter_rank()));
  }

  {
    StepTimer timer(ws->profile, StepOp::kEmbed);
    Embed(plan, ws->x.data());
  }
  if (rotation_) RotateResidual(ws->x.data(), n, /*transpose=*/false, ws);
  for (int l = 0; l < c.n_layers; ++l) {
    if (quant_) {
      QuantAttention(l, plan, kv, ws);
      QuantFeedForward(l, plan, ws);
    } else {
      Attention(l, plan, kv, ws);
      FeedForward(l, plan, ws);
    }
  }
  const auto& rows = plan.logit_tokens();
  if (rows.empty()) return absl::OkStatus();
  const int m = static_cast<int>(rows.size());
  Grow(ws->last, static_cast<size_t>(m) * c.hidden);
  for (int i = 0; i < m; ++i) {
    std::copy_n(ws->x.data() + static_cast<size_t>(rows[i]) * c.hidden, c.hidden,
                ws->last.data() + static_cast<size_t>(i) * c.hidden);
  }
  if (rotation_) RotateResidual(ws->last.data(), m, /*transpose=*/true, ws);
  StepTimer timer(ws->profile, StepOp::kHead);
  backend_->RmsNorm(ws->last.data(), weights_.output_norm.data(), m, c.hidden, c.rms_eps,
                    ws->last.data());
  if (head_) {
    atom_->Quantize(ws->last.data(), m, head_->perm.data(), head_->weight.spec, &ws->atom,
                    nullptr);
    kernels::quant::AtomWeightView head = head_->weight.view();
    head.prepared = head_prepared_.get();
    atom_->MatMul(head, ws->atom, logits);
    return absl::OkStatus();
  }
  backend_->PackActivations(weights_.output.dtype, ws->last.data(), m, c.hidden, &ws->pack);
  backend_->MatMul(weights_.output, ws->pack, logits);
  return absl::OkStatus();
}

}  // namespace loom
