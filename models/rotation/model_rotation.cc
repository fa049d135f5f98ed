#include "models/rotation/model_rotation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/dtype.h"

namespace loom {
namespace {

absl::StatusOr<kernels::HadamardTransform> Transform(int n, const char* what,
                                                     std::vector<float> signs = {}) {
  absl::StatusOr<kernels::HadamardTransform> t =
      kernels::HadamardTransform::Create(n, std::move(signs));
  if (!t.ok()) {
    return absl::Status(t.status().code(),
                        absl::StrCat("cannot rotate the ", what, " (width ", n, "): ",
                                     t.status().message()));
  }
  return t;
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

}  // namespace

absl::StatusOr<ModelRotation> ModelRotation::Create(const LlamaConfig& c, const RotationSpec& spec) {
  absl::StatusOr<kernels::HadamardTransform> r = Transform(
      c.hidden, "residual stream", kernels::HadamardTransform::RandomSigns(c.hidden, spec.seed));
  if (!r.ok()) return r.status();
  ModelRotation m(spec, *std::move(r));
  if (spec.online_attn_out) {
    absl::StatusOr<kernels::HadamardTransform> t =
        Transform(c.n_heads * c.head_dim, "attention output");
    if (!t.ok()) return t.status();
    m.attn_out_ = *std::move(t);
  }
  if (spec.online_silu_mul) {
    absl::StatusOr<kernels::HadamardTransform> t = Transform(c.intermediate, "FFN intermediate");
    if (!t.ok()) return t.status();
    m.silu_mul_ = *std::move(t);
  }
  m.unit_.assign(c.hidden, 1.0f);
  return m;
}

std::string ModelRotation::Fingerprint() const {
  uint64_t h = residual_.Fingerprint();
  for (const auto* t : {attn_out(), silu_mul()}) {
    h = (h ^ (t ? t->Fingerprint() : 0x5A5A5A5A5A5A5A5Aull)) * 0x100000001B3ull;
  }
  return absl::StrFormat("%016x", h);
}

absl::Status ModelRotation::SetFoldedNorms(const ModelSource& base) {
  const LlamaConfig& c = base.config();
  if (c.hidden != residual_.n()) {
    return absl::InvalidArgumentError(absl::StrCat("the rotation is for hidden ", residual_.n(),
                                                   ", the model has ", c.hidden));
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
