#include "models/rotation/model_rotation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/dtype.h"

namespace loom {
namespace {

absl::StatusOr<kernels::HadamardTransform> Transform(int n, const char* what,
                                                     std::vector<float> signs = {}) {
  absl::StatusOr<kernels::HadamardTransform> t =
      kernels::HadamardTransform::CreateFullOrBlocked(n, std::move(signs));
  if (!t.ok()) {
    return absl::Status(t.status().code(),
                        absl::StrCat("cannot rotate the ", what, " (", n, " rotated channels): ",
                                     t.status().message()));
  }
  return t;
}

absl::Status CheckOrder(const std::vector<int32_t>& p, int width, const std::string& what) {
  if (static_cast<int>(p.size()) != width) {
    return absl::InvalidArgumentError(
        absl::StrCat("rotation order of ", what, " has ", p.size(), " entries, not ", width));
  }
  std::vector<bool> seen(width, false);
  for (int32_t v : p) {
    if (v < 0 || v >= width || seen[v]) {
      return absl::InvalidArgumentError(absl::StrCat("rotation order of ", what, " is not a permutation"));
    }
    seen[v] = true;
  }
  return absl::OkStatus();
}

// One order per layer when count > 0, none otherwise.
absl::Status CheckLayerOrders(const std::vector<std::vector<int32_t>>& orders, int count,
                              int n_layers, int width, const char* what) {
  if (count == 0) {
    if (!orders.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": orders without outliers"));
    return absl::OkStatus();
  }
  if (static_cast<int>(orders.size()) != n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", orders.size(), " rotation orders for ", n_layers, " layers"));
  }
  for (int l = 0; l < n_layers; ++l) {
    if (absl::Status s = CheckOrder(orders[l], width, absl::StrCat(what, " layer ", l)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> NormScale(const ModelSource& base, const std::string& name,
                                             int hidden) {
  absl::StatusOr<const WeightTensor*> t = base.Tensor(name);
  if (!t.ok()) return absl::InvalidArgumentError(std::string(t.status().message()));
  const WeightTensor& w = **t;
  if (w.rows() != 1 || w.cols() != hidden) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not [", hidden, "]"));
  }
  std::vector<float> g(hidden);
  DequantizeRow(w.dtype, w.data, g.data(), hidden);
  return g;
}

uint64_t Mix(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

void ApplyPartialRotation(const kernels::HadamardTransform& t, const std::vector<int32_t>& order,
                          int width, float* x, int64_t rows, bool transpose) {
  if (order.empty() && t.n() == width) {
    t.Apply(x, rows, transpose);
    return;
  }
  std::vector<float> buf(width);
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * width;
    for (int j = 0; j < width; ++j) buf[j] = v[order.empty() ? j : order[j]];
    t.Apply(buf.data(), 1, transpose);  // the first t.n() permuted channels
    for (int j = 0; j < width; ++j) v[order.empty() ? j : order[j]] = buf[j];
  }
}

absl::StatusOr<ModelRotation> ModelRotation::Create(const LlamaConfig& c, const RotationSpec& spec,
                                                    RotationOrders orders) {
  const int qd = c.n_heads * c.head_dim;
  struct Count { int n, width; const char* what; };
  for (Count k : {Count{spec.residual_outliers, c.hidden, "residual_outliers"},
                  Count{spec.attn_out_outliers, qd, "attn_out_outliers"},
                  Count{spec.silu_mul_outliers, c.intermediate, "silu_mul_outliers"}}) {
    if (k.n < 0 || k.n >= k.width) {
      return absl::InvalidArgumentError(absl::StrCat("rotation: ", k.what, " = ", k.n,
                                                     " outside [0, ", k.width, ")"));
    }
  }
  if ((spec.attn_out_outliers > 0 && !spec.online_attn_out) ||
      (spec.silu_mul_outliers > 0 && !spec.online_silu_mul)) {
    return absl::InvalidArgumentError("rotation: outliers of an activation that is not rotated online");
  }
  if (spec.residual_outliers > 0) {
    if (absl::Status s = CheckOrder(orders.residual, c.hidden, "the residual"); !s.ok()) return s;
  } else if (!orders.residual.empty()) {
    return absl::InvalidArgumentError("rotation: a residual order without residual outliers");
  }
  if (absl::Status s = CheckLayerOrders(orders.attn_out, spec.attn_out_outliers, c.n_layers, qd, "attn_out");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLayerOrders(orders.silu_mul, spec.silu_mul_outliers, c.n_layers,
                                        c.intermediate, "silu_mul");
      !s.ok()) {
    return s;
  }
  const int m = c.hidden - spec.residual_outliers;
  absl::StatusOr<kernels::HadamardTransform> r =
      Transform(m, "residual stream", kernels::HadamardTransform::RandomSigns(m, spec.seed));
  if (!r.ok()) return r.status();
  ModelRotation out(spec, *std::move(r));
  out.orders_ = std::move(orders);
  out.hidden_ = c.hidden;
  out.n_layers_ = c.n_layers;
  if (spec.online_attn_out) {
    absl::StatusOr<kernels::HadamardTransform> t =
        Transform(qd - spec.attn_out_outliers, "attention output");
    if (!t.ok()) return t.status();
    out.attn_out_ = *std::move(t);
  }
  if (spec.online_silu_mul) {
    absl::StatusOr<kernels::HadamardTransform> t =
        Transform(c.intermediate - spec.silu_mul_outliers, "FFN intermediate");
    if (!t.ok()) return t.status();
    out.silu_mul_ = *std::move(t);
  }
  out.unit_.assign(c.hidden, 1.0f);
  return out;
}

void ModelRotation::RotateResidual(float* x, int64_t rows, bool transpose) const {
  ApplyPartialRotation(residual_, orders_.residual, hidden_, x, rows, transpose);
}

void ModelRotation::RotateAttnOut(int layer, float* x, int64_t rows) const {
  static const std::vector<int32_t> kNone;
  const std::vector<int32_t>& order = orders_.attn_out.empty() ? kNone : orders_.attn_out[layer];
  ApplyPartialRotation(*attn_out_, order, attn_out_->n() + spec_.attn_out_outliers, x, rows, false);
}

void ModelRotation::RotateSiluMul(int layer, float* x, int64_t rows) const {
  static const std::vector<int32_t> kNone;
  const std::vector<int32_t>& order = orders_.silu_mul.empty() ? kNone : orders_.silu_mul[layer];
  ApplyPartialRotation(*silu_mul_, order, silu_mul_->n() + spec_.silu_mul_outliers, x, rows, false);
}

std::string ModelRotation::Fingerprint() const {
  uint64_t h = residual_.Fingerprint();
  for (const auto* t : {attn_out(), silu_mul()}) {
    h = (h ^ (t ? t->Fingerprint() : 0x5A5A5A5A5A5A5A5Aull)) * 0x100000001B3ull;
  }
  if (spec_.residual_outliers > 0 || spec_.attn_out_outliers > 0 || spec_.silu_mul_outliers > 0) {
    const int32_t counts[3] = {spec_.residual_outliers, spec_.attn_out_outliers,
                               spec_.silu_mul_outliers};
    h = Mix(h, counts, sizeof(counts));
    h = Mix(h, orders_.residual.data(), orders_.residual.size() * sizeof(int32_t));
    for (const auto* layers : {&orders_.attn_out, &orders_.silu_mul}) {
      for (const std::vector<int32_t>& o : *layers) h = Mix(h, o.data(), o.size() * sizeof(int32_t));
    }
  }
  return absl::StrFormat("%016x", h);
}

absl::Status ModelRotation::SetFoldedNorms(const ModelSource& base) {
  const LlamaConfig& c = base.config();
  if (c.hidden != hidden_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rotation is for hidden ", hidden_, ", the model has ", c.hidden));
  }
  std::vector<std::vector<float>> attn(c.n_layers), ffn(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    absl::StatusOr<std::vector<float>> a =
        NormScale(base, absl::StrCat("blk.", l, ".attn_norm.weight"), c.hidden);
    if (!a.ok()) return a.status();
    absl::StatusOr<std::vector<float>> f =
        NormScale(base, absl::StrCat("blk.", l, ".ffn_norm.weight"), c.hidden);
    if (!f.ok()) return f.status();
    attn[l] = *std::move(a);
    ffn[l] = *std::move(f);
  }
  attn_norm_ = std::move(attn);
  ffn_norm_ = std::move(ffn);
  return absl::OkStatus();
}

}  // namespace loom
