#include "models/llama/quantized_weights.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"

namespace loom {
namespace {

namespace q = kernels::quant;

bool SameSpec(const q::QuantSpec& a, const q::QuantSpec& b) {
  return a.k == b.k && a.n_outliers == b.n_outliers && a.group == b.group &&
         a.w_bits == b.w_bits && a.a_bits == b.a_bits;
}

absl::Status CheckView(const q::AtomWeightView& w, const char* name, int layer, int64_t rows,
                       int k, q::QuantScheme scheme) {
  auto err = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("quantized layer %d %s: %s", layer, name, what));
  };
  if (absl::Status s = w.spec.Validate(); !s.ok()) return err(std::string(s.message()));
  if (w.rows != rows || w.spec.k != k) {
    return err(absl::StrFormat("shape [%d, %d], the model needs [%d, %d]", w.rows, w.spec.k,
                               rows, k));
  }
  if (w.spec.w_bits != q::SchemeWeightBits(scheme) ||
      w.spec.a_bits != q::SchemeActivationBits(scheme)) {
    return err(absl::StrFormat("w%da%d does not match scheme %s", w.spec.w_bits,
                               w.spec.a_bits, q::QuantSchemeName(scheme)));
  }
  if (w.q == nullptr || w.scales == nullptr) return err("missing weights or scales");
  if (w.spec.n_outliers > 0 && (w.q_outlier == nullptr || w.outlier_scales == nullptr)) {
    return err("missing outlier weights or scales");
  }
  return absl::OkStatus();
}

absl::Status CheckPerm(const int32_t* perm, int k, const char* name, int layer) {
  if (perm == nullptr) return absl::OkStatus();
  std::vector<bool> seen(k, false);
  for (int j = 0; j < k; ++j) {
    if (perm[j] < 0 || perm[j] >= k || seen[perm[j]]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "quantized layer %d %s: not a permutation of [0, %d) (entry %d = %d)", layer, name,
          k, j, perm[j]));
    }
    seen[perm[j]] = true;
  }
  return absl::OkStatus();
}

// The rotation's channel orders are the layers' Atom permutations: its outliers are the
// quantized linears' INT8 channels (model_rotation.h), and its widths the model's.
absl::Status CheckRotation(const ModelRotation& r, const QuantizedWeights& w, const LlamaConfig& c) {
  const RotationSpec& s = r.spec();
  const int qd = c.n_heads * c.head_dim;
  if (r.hidden() != c.hidden || (r.attn_out() && r.attn_out()->n() + s.attn_out_outliers != qd) ||
      (r.silu_mul() && r.silu_mul()->n() + s.silu_mul_outliers != c.intermediate)) {
    return absl::InvalidArgumentError(
        "quantized weights: the rotation's widths do not fit the model");
  }
  auto same = [](const int32_t* perm, const std::vector<int32_t>& order) {
    return perm != nullptr && !order.empty() && std::equal(order.begin(), order.end(), perm);
  };
  auto identity = [](const int32_t* perm, int k) {
    if (perm == nullptr) return true;
    for (int j = 0; j < k; ++j) if (perm[j] != j) return false;
    return true;
  };
  for (int l = 0; l < c.n_layers; ++l) {
    const QuantizedLayerWeights& L = w.layers[l];
    const bool ok_res = s.residual_outliers == 0
                            ? L.q.spec.n_outliers == 0 && L.gate.spec.n_outliers == 0
                            : same(L.attn_norm_perm, r.orders().residual) &&
                                  same(L.ffn_norm_perm, r.orders().residual) &&
                                  L.q.spec.n_outliers == s.residual_outliers &&
                                  L.gate.spec.n_outliers == s.residual_outliers;
    const bool ok_ao = r.attn_out() == nullptr ||
                       (s.attn_out_outliers == 0
                            ? identity(L.attn_out_perm, qd) && L.o.spec.n_outliers == 0
                            : same(L.attn_out_perm, r.orders().attn_out[l]) &&
                                  L.o.spec.n_outliers == s.attn_out_outliers);
    const bool ok_sm = r.silu_mul() == nullptr ||
                       (s.silu_mul_outliers == 0
                            ? identity(L.silu_mul_perm, c.intermediate) && L.down.spec.n_outliers == 0
                            : same(L.silu_mul_perm, r.orders().silu_mul[l]) &&
                                  L.down.spec.n_outliers == s.silu_mul_outliers);
    if (!ok_res || !ok_ao || !ok_sm) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "quantized layer %d: the INT8 outlier channels and orders do not match the rotation's "
          "(%s)", l, !ok_res ? "residual" : !ok_ao ? "attn_out" : "silu_mul"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status QuantizedWeights::Validate(const LlamaConfig& c) const {
  if (scheme == q::QuantScheme::kNone) {
    return absl::InvalidArgumentError("quantized weights: scheme is none");
  }
  if (static_cast<int>(layers.size()) != c.n_layers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "quantized weights have %d layers, the model %d", layers.size(), c.n_layers));
  }
  const int h = c.hidden, qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim,
            ff = c.intermediate;
  if (rotation != nullptr) {
    if (absl::Status s = CheckRotation(*rotation, *this, c); !s.ok()) return s;
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const QuantizedLayerWeights& L = layers[l];
    struct Item {
      const q::AtomWeightView* w;
      const char* name;
      int64_t rows;
      int k;
    };
    const Item items[] = {{&L.q, "attn_q", qd, h},          {&L.k, "attn_k", kvd, h},
                          {&L.v, "attn_v", kvd, h},         {&L.o, "attn_output", h, qd},
                          {&L.gate, "ffn_gate", ff, h},     {&L.up, "ffn_up", ff, h},
                          {&L.down, "ffn_down", h, ff}};
    for (const Item& it : items) {
      if (absl::Status s = CheckView(*it.w, it.name, l, it.rows, it.k, scheme); !s.ok()) {
        return s;
      }
    }
    if (!SameSpec(L.q.spec, L.k.spec) || !SameSpec(L.q.spec, L.v.spec)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "quantized layer %d: attn_q/k/v read one activation but have different specs", l));
    }
    if (!SameSpec(L.gate.spec, L.up.spec)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "quantized layer %d: ffn_gate/up read one activation but have different specs", l));
    }
    if (absl::Status s = CheckPerm(L.attn_norm_perm, h, "attn_norm.perm", l); !s.ok()) return s;
    if (absl::Status s = CheckPerm(L.attn_out_perm, qd, "attn_out.perm", l); !s.ok()) return s;
    if (absl::Status s = CheckPerm(L.ffn_norm_perm, h, "ffn_norm.perm", l); !s.ok()) return s;
    if (absl::Status s = CheckPerm(L.silu_mul_perm, ff, "silu_mul.perm", l); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status OverrideScheme(q::QuantScheme scheme, QuantizedWeights* w) {
  if (scheme == q::QuantScheme::kNone) {
    return absl::InvalidArgumentError("scheme override: none is not a quantized scheme");
  }
  if (q::SchemeWeightBits(scheme) != q::SchemeWeightBits(w->scheme)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "scheme override: %s needs %d-bit weights, the checkpoint (%s) has %d-bit",
        q::QuantSchemeName(scheme), q::SchemeWeightBits(scheme), q::QuantSchemeName(w->scheme),
        q::SchemeWeightBits(w->scheme)));
  }
  const int a_bits = q::SchemeActivationBits(scheme);
  for (QuantizedLayerWeights& L : w->layers) {
    for (q::AtomWeightView* v : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
      v->spec.a_bits = a_bits;
    }
  }
  w->scheme = scheme;
  return absl::OkStatus();
}

}  // namespace loom
