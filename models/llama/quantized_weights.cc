#include "models/llama/quantized_weights.h"

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
    const ModelRotation& r = *rotation;
    if (r.residual().n() != h || (r.attn_out() && r.attn_out()->n() != qd) ||
        (r.silu_mul() && r.silu_mul()->n() != ff)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "quantized weights: the rotation's widths (residual %d, attn_out %d, silu_mul %d) do "
          "not fit the model (%d, %d, %d)", r.residual().n(), r.attn_out() ? r.attn_out()->n() : 0,
          r.silu_mul() ? r.silu_mul()->n() : 0, h, qd, ff));
    }
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
