// loom_quant.json <-> QuantizedCheckpointMeta.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/quant/quantized_checkpoint.h"

namespace loom::quant {
namespace {

using nlohmann::json;
using kernels::quant::QuantScheme;

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(kQuantJsonName, ": ", what));
}

// The value at `key` of `j` (an object), of the JSON type `want` checks.
template <typename Check>
absl::StatusOr<const json*> Field(const json& j, const std::string& where, const char* key,
                                  Check want, const char* type) {
  auto it = j.find(key);
  if (it == j.end()) return Bad(absl::StrCat("missing key '", where, key, "'"));
  if (!want(*it)) return Bad(absl::StrCat("'", where, key, "' must be ", type));
  return &*it;
}

absl::StatusOr<std::string> Str(const json& j, const std::string& where, const char* key) {
  auto f = Field(j, where, key, [](const json& v) { return v.is_string(); }, "a string");
  if (!f.ok()) return f.status();
  return (*f)->get<std::string>();
}

absl::StatusOr<int64_t> Int(const json& j, const std::string& where, const char* key,
                            int64_t min) {
  auto f = Field(j, where, key, [](const json& v) { return v.is_number_integer(); },
                 "an integer");
  if (!f.ok()) return f.status();
  const int64_t v = (*f)->get<int64_t>();
  if (v < min || v > (int64_t{1} << 40)) {
    return Bad(absl::StrCat("'", where, key, "' = ", v, " is out of range"));
  }
  return v;
}

absl::StatusOr<const json*> Object(const json& j, const char* key) {
  return Field(j, "", key, [](const json& v) { return v.is_object(); }, "an object");
}

}  // namespace

json QuantizedCheckpointMeta::ToJson() const {
  json o = json::object();
  for (int a = 0; a < kNumQuantActivations; ++a) {
    o[QuantActivationName(static_cast<QuantActivation>(a))] = outliers[a];
  }
  json j = json{
      {"format", kQuantFormat},
      {"version", rotation ? kQuantFormatVersionRotated : kQuantFormatVersion},
      {"architecture", architecture},
      {"scheme", std::string(kernels::quant::QuantSchemeName(scheme))},
      {"group_size", group_size},
      {"weight_bits", weight_bits},
      {"activation_bits", activation_bits},
      {"outliers", o},
      {"gptq", gptq},
      {"clip_search",
       {{"enabled", clip_search.enabled},
        {"min_ratio", clip_search.min_ratio},
        {"steps", clip_search.steps},
        {"objective", "sum_j E[x_j^2] (w_j - q_j s)^2 per (row, group)"}}},
      {"gptq_options",
       {{"damp", gptq_options.damp},
        {"act_order", gptq_options.act_order},
        {"static_groups", gptq_options.static_groups},
        {"hessian_scale_search", gptq_options.hessian_scale_search}}},
      {"w4_full_range", w4_full_range},
      {"outlier_selection", outlier_selection},
      {"refit_scales", refit_scales},
      {"base_model",
       {{"path", base_model.path}, {"sha256", base_model.sha256}, {"bytes", base_model.bytes}}},
      {"calibration",
       {{"text", calibration.text},
        {"sha256", calibration.sha256},
        {"sequences", calibration.sequences},
        {"seq_len", calibration.seq_len},
        {"source", calibration.source}}},
      {"n_layers", n_layers},
  };
  if (!calibration.texts.empty()) {
    json texts = json::array();
    for (const CalibrationText& t : calibration.texts) {
      texts.push_back({{"path", t.path}, {"sha256", t.sha256}, {"weight", t.weight},
                       {"sequences", t.sequences}});
    }
    j["calibration"]["texts"] = texts;
  }
  if (rotation) {
    j["rotation"] = {{"kind", kRotationKind},
                     {"seed", rotation->spec.seed},
                     {"online_attn_out", rotation->spec.online_attn_out},
                     {"online_silu_mul", rotation->spec.online_silu_mul},
                     {"residual_outliers", rotation->spec.residual_outliers},
                     {"attn_out_outliers", rotation->spec.attn_out_outliers},
                     {"silu_mul_outliers", rotation->spec.silu_mul_outliers},
                     {"fingerprint", rotation->fingerprint}};
  }
  return j;
}

namespace {

// format, version, architecture, scheme, group_size, weight_bits, activation_bits.
absl::Status ParseScheme(const json& j, QuantizedCheckpointMeta* m) {
  auto format = Str(j, "", "format");
  if (!format.ok()) return format.status();
  if (*format != kQuantFormat) {
    return Bad(absl::StrCat("format '", *format, "' is not '", kQuantFormat, "'"));
  }
  auto version = Int(j, "", "version", 0);
  if (!version.ok()) return version.status();
  if (*version != kQuantFormatVersion && *version != kQuantFormatVersionRotated) {
    return Bad(absl::StrCat("version ", *version, " is not supported (only ",
                            kQuantFormatVersion, " and ", kQuantFormatVersionRotated, ")"));
  }
  const bool rotated = *version == kQuantFormatVersionRotated;
  if (rotated != j.contains("rotation")) {
    return Bad(rotated ? "version 2 (rotated) without a 'rotation' object"
                       : "'rotation' in a version 1 checkpoint (rotated ones are version 2)");
  }
  auto arch = Str(j, "", "architecture");
  if (!arch.ok()) return arch.status();
  if (*arch != "llama") return Bad("architecture '" + *arch + "' is not supported (only 'llama')");
  m->architecture = *arch;
  auto scheme_name = Str(j, "", "scheme");
  if (!scheme_name.ok()) return scheme_name.status();
  auto scheme = kernels::quant::ParseQuantScheme(*scheme_name);
  if (!scheme.ok() || *scheme == QuantScheme::kNone) {
    return Bad("scheme '" + *scheme_name + "' is not one of w4a4, w4a8, w8a8");
  }
  m->scheme = *scheme;
  auto group = Int(j, "", "group_size", 2);
  if (!group.ok()) return group.status();
  if (*group % 2 != 0) return Bad(absl::StrCat("group_size ", *group, " is odd"));
  m->group_size = static_cast<int>(*group);
  auto wb = Int(j, "", "weight_bits", 0);
  auto ab = Int(j, "", "activation_bits", 0);
  if (!wb.ok()) return wb.status();
  if (!ab.ok()) return ab.status();
  if (*wb != kernels::quant::SchemeWeightBits(m->scheme) ||
      *ab != kernels::quant::SchemeActivationBits(m->scheme)) {
    return Bad(absl::StrCat("weight_bits ", *wb, " / activation_bits ", *ab,
                            " do not match scheme ", *scheme_name));
  }
  m->weight_bits = static_cast<int>(*wb);
  m->activation_bits = static_cast<int>(*ab);
  return absl::OkStatus();
}

// outliers, gptq, clip_search.
absl::Status ParseMethod(const json& j, QuantizedCheckpointMeta* m) {
  auto outliers = Object(j, "outliers");
  if (!outliers.ok()) return outliers.status();
  for (int a = 0; a < kNumQuantActivations; ++a) {
    auto n = Int(**outliers, "outliers.", QuantActivationName(static_cast<QuantActivation>(a)), 0);
    if (!n.ok()) return n.status();
    m->outliers[a] = static_cast<int>(*n);
  }
  auto gptq = Field(j, "", "gptq", [](const json& v) { return v.is_boolean(); }, "a boolean");
  if (!gptq.ok()) return gptq.status();
  m->gptq = (*gptq)->get<bool>();
  auto clip = Object(j, "clip_search");
  if (!clip.ok()) return clip.status();
  auto enabled = Field(**clip, "clip_search.", "enabled",
                       [](const json& v) { return v.is_boolean(); }, "a boolean");
  auto ratio = Field(**clip, "clip_search.", "min_ratio",
                     [](const json& v) { return v.is_number(); }, "a number");
  auto steps = Int(**clip, "clip_search.", "steps", 1);
  if (!enabled.ok()) return enabled.status();
  if (!ratio.ok()) return ratio.status();
  if (!steps.ok()) return steps.status();
  m->clip_search = {(*enabled)->get<bool>(), (*ratio)->get<double>(), static_cast<int>(*steps)};
  // Optional (older checkpoints lack them): gptq_options, w4_full_range.
  auto is_bool = [](const json& v) { return v.is_boolean(); };
  if (j.contains("gptq_options")) {
    auto g = Object(j, "gptq_options");
    if (!g.ok()) return g.status();
    auto damp = Field(**g, "gptq_options.", "damp", [](const json& v) { return v.is_number(); },
                      "a number");
    auto act = Field(**g, "gptq_options.", "act_order", is_bool, "a boolean");
    auto st = Field(**g, "gptq_options.", "static_groups", is_bool, "a boolean");
    auto hs = Field(**g, "gptq_options.", "hessian_scale_search", is_bool, "a boolean");
    if (!damp.ok()) return damp.status();
    if (!act.ok()) return act.status();
    if (!st.ok()) return st.status();
    if (!hs.ok()) return hs.status();
    const double d = (*damp)->get<double>();
    if (!(d >= 0)) return Bad(absl::StrCat("'gptq_options.damp' = ", d, " is negative"));
    m->gptq_options = {d, (*act)->get<bool>(), (*st)->get<bool>(), (*hs)->get<bool>()};
  }
  if (j.contains("w4_full_range")) {
    auto fr = Field(j, "", "w4_full_range", is_bool, "a boolean");
    if (!fr.ok()) return fr.status();
    m->w4_full_range = (*fr)->get<bool>();
  }
  if (j.contains("refit_scales")) {
    auto rs = Field(j, "", "refit_scales", is_bool, "a boolean");
    if (!rs.ok()) return rs.status();
    m->refit_scales = (*rs)->get<bool>();
  }
  if (j.contains("outlier_selection")) {
    auto sel = Str(j, "", "outlier_selection");
    if (!sel.ok()) return sel.status();
    if (*sel != "energy" && *sel != "owq") {
      return Bad("outlier_selection '" + *sel + "' is not 'energy' or 'owq'");
    }
    m->outlier_selection = *sel;
  }
  return absl::OkStatus();
}

// base_model, calibration, n_layers.
absl::Status ParseProvenance(const json& j, QuantizedCheckpointMeta* m) {
  auto base = Object(j, "base_model");
  if (!base.ok()) return base.status();
  auto bpath = Str(**base, "base_model.", "path");
  auto bsha = Str(**base, "base_model.", "sha256");
  auto bbytes = Int(**base, "base_model.", "bytes", 0);
  if (!bpath.ok()) return bpath.status();
  if (!bsha.ok()) return bsha.status();
  if (!bbytes.ok()) return bbytes.status();
  m->base_model = {*bpath, *bsha, *bbytes};
  auto cal = Object(j, "calibration");
  if (!cal.ok()) return cal.status();
  auto ctext = Str(**cal, "calibration.", "text");
  auto csha = Str(**cal, "calibration.", "sha256");
  auto cseq = Int(**cal, "calibration.", "sequences", 0);
  auto clen = Int(**cal, "calibration.", "seq_len", 0);
  auto csrc = Str(**cal, "calibration.", "source");
  if (!ctext.ok()) return ctext.status();
  if (!csha.ok()) return csha.status();
  if (!cseq.ok()) return cseq.status();
  if (!clen.ok()) return clen.status();
  if (!csrc.ok()) return csrc.status();
  m->calibration = {*ctext, *csha, static_cast<int>(*cseq), static_cast<int>(*clen), *csrc, {}};
  if ((*cal)->contains("texts")) {
    const json& texts = (**cal)["texts"];
    if (!texts.is_array()) return Bad("'calibration.texts' must be an array");
    for (const json& t : texts) {
      if (!t.is_object()) return Bad("'calibration.texts' entries must be objects");
      auto path = Str(t, "calibration.texts[].", "path");
      auto sha = Str(t, "calibration.texts[].", "sha256");
      auto w = Field(t, "calibration.texts[].", "weight", [](const json& v) { return v.is_number(); },
                     "a number");
      auto n = Int(t, "calibration.texts[].", "sequences", 0);
      if (!path.ok()) return path.status();
      if (!sha.ok()) return sha.status();
      if (!w.ok()) return w.status();
      if (!n.ok()) return n.status();
      m->calibration.texts.push_back({*path, *sha, (*w)->get<double>(), static_cast<int>(*n)});
    }
  }
  auto layers = Int(j, "", "n_layers", 1);
  if (!layers.ok()) return layers.status();
  m->n_layers = static_cast<int>(*layers);
  return absl::OkStatus();
}

// rotation (version 2).
absl::Status ParseRotation(const json& j, QuantizedCheckpointMeta* m) {
  if (!j.contains("rotation")) return absl::OkStatus();
  auto r = Object(j, "rotation");
  if (!r.ok()) return r.status();
  auto kind = Str(**r, "rotation.", "kind");
  if (!kind.ok()) return kind.status();
  if (*kind != kRotationKind) {
    return Bad(absl::StrCat("rotation kind '", *kind, "' is not '", kRotationKind, "'"));
  }
  auto seed = Field(**r, "rotation.", "seed", [](const json& v) { return v.is_number_unsigned(); },
                    "an unsigned integer");
  auto is_bool = [](const json& v) { return v.is_boolean(); };
  auto ao = Field(**r, "rotation.", "online_attn_out", is_bool, "a boolean");
  auto sm = Field(**r, "rotation.", "online_silu_mul", is_bool, "a boolean");
  auto fp = Str(**r, "rotation.", "fingerprint");
  if (!seed.ok()) return seed.status();
  if (!ao.ok()) return ao.status();
  if (!sm.ok()) return sm.status();
  if (!fp.ok()) return fp.status();
  RotationMeta rot;
  rot.spec.seed = (*seed)->get<uint64_t>();
  rot.spec.online_attn_out = (*ao)->get<bool>();
  rot.spec.online_silu_mul = (*sm)->get<bool>();
  int* counts[3] = {&rot.spec.residual_outliers, &rot.spec.attn_out_outliers,
                    &rot.spec.silu_mul_outliers};
  const char* keys[3] = {"residual_outliers", "attn_out_outliers", "silu_mul_outliers"};
  for (int i = 0; i < 3; ++i) {  // optional, 0 when absent
    if (!(*r)->contains(keys[i])) continue;
    auto n = Int(**r, "rotation.", keys[i], 0);
    if (!n.ok()) return n.status();
    *counts[i] = static_cast<int>(*n);
  }
  rot.fingerprint = *fp;
  m->rotation = rot;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuantizedCheckpointMeta> QuantizedCheckpointMeta::FromJson(const json& j) {
  if (!j.is_object()) return Bad("not a JSON object");
  QuantizedCheckpointMeta m;
  if (absl::Status s = ParseScheme(j, &m); !s.ok()) return s;
  if (absl::Status s = ParseMethod(j, &m); !s.ok()) return s;
  if (absl::Status s = ParseProvenance(j, &m); !s.ok()) return s;
  if (absl::Status s = ParseRotation(j, &m); !s.ok()) return s;
  return m;
}

kernels::quant::QuantSpec QuantizedCheckpointMeta::Spec(QuantProjection p, int k) const {
  kernels::quant::QuantSpec s;
  s.k = k;
  s.n_outliers = outliers[static_cast<int>(InputOf(p))];
  s.group = group_size;
  s.w_bits = weight_bits;
  s.a_bits = activation_bits;
  return s;
}

}  // namespace loom::quant
