#include "models/lora/peft_loader.h"

#include <sys/stat.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/lora/adapter_pattern.h"
#include "models/lora/lora_tensor_copy.h"
#include "models/weights/json_file.h"
#include "models/weights/qk_permutation.h"
#include "models/weights/safetensors_file.h"
#include "models/weights/untrusted_text.h"
#include "nlohmann/json.hpp"
#include "re2/re2.h"

namespace loom {
namespace {

using Json = nlohmann::ordered_json;

bool IsFile(const std::string& p) {
  struct stat sb;
  return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

std::string ShapeStr(const std::vector<int64_t>& s) {
  return "[" + absl::StrJoin(s, ", ") + "]";
}

// Bounds on adapter_config.json, checked before anything is compiled or looked up. Real
// configs are a few KB with a handful of module names and pattern keys.
constexpr size_t kMaxConfigBytes = size_t{1} << 20;
constexpr int kMaxConfigDepth = 16;
constexpr size_t kMaxModuleNames = 256;
constexpr size_t kMaxPatternKeys = 256;
constexpr size_t kMaxLayerList = 4096;
constexpr size_t kMaxModuleNameBytes = 256;
// An adapter's safetensors header: ~150 bytes per tensor, so 8 MiB is 50,000 tensors.
constexpr uint64_t kMaxAdapterHeaderBytes = uint64_t{8} << 20;

// A JSON value of the config, for a message: strings bounded and escaped, anything else
// by its type (a value is never dumped: it may be huge).
std::string Describe(const Json& v) {
  if (v.is_string()) return QuoteUntrusted(v.get_ref<const std::string&>());
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
  return std::string("a JSON ") + v.type_name();
}

// PEFT's module selection: a list of names (exact path or ".name" suffix) or one regex
// over the whole path (RE2, see adapter_pattern.h).
struct ModuleMatcher {
  std::shared_ptr<const re2::RE2> re;  // set for a regex
  std::vector<std::string> names;
  bool is_regex() const { return re != nullptr; }
  bool Matches(const std::string& path) const {
    if (re != nullptr) return re2::RE2::FullMatch(path, *re);
    for (const std::string& n : names) {
      if (path == n || absl::EndsWith(path, "." + n)) return true;
    }
    return false;
  }
};

absl::StatusOr<ModuleMatcher> ParseMatcher(const std::string& file, const std::string& key,
                                           const Json& v) {
  ModuleMatcher m;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "all-linear") {
      for (LoraTarget t : kAllLoraTargets) m.names.push_back(PeftModuleName(t));
      return m;
    }
    auto re = CompileAdapterPattern(file, key, s);
    if (!re.ok()) return re.status();
    m.re = *std::move(re);
    return m;
  }
  if (v.is_array()) {
    if (v.size() > kMaxModuleNames) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: %s lists %d modules (at most %d)", file, key, v.size(), kMaxModuleNames));
    }
    for (const Json& e : v) {
      if (!e.is_string()) {
        return absl::FailedPreconditionError(
            absl::StrFormat("%s: %s must hold strings", file, key));
      }
      const std::string& name = e.get_ref<const std::string&>();
      if (name.size() > kMaxModuleNameBytes) {
        return absl::FailedPreconditionError(
            absl::StrFormat("%s: %s entry %s is longer than %d bytes", file, key,
                            QuoteUntrusted(name), kMaxModuleNameBytes));
      }
      m.names.push_back(name);
    }
    return m;
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("%s: %s must be a list of module names or a regex string", file, key));
}

// rank_pattern / alpha_pattern: {key: number}, matched as PEFT's get_pattern_key.
struct Pattern {
  struct Hit {
    const std::string* key;
    double value;
  };
  std::vector<std::pair<std::string, double>> exact;
  std::vector<std::pair<std::unique_ptr<const re2::RE2>, double>> regexes;  // same order
  std::optional<Hit> Lookup(const std::string& path) const {
    for (const auto& [k, v] : exact) {
      if (k == path) return Hit{&k, v};
    }
    for (size_t i = 0; i < regexes.size(); ++i) {
      if (re2::RE2::FullMatch(path, *regexes[i].first)) {
        return Hit{&exact[i].first, regexes[i].second};
      }
    }
    return std::nullopt;
  }
};

absl::StatusOr<Pattern> ParsePattern(const std::string& file, const Json& cfg,
                                     const std::string& key) {
  Pattern p;
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return p;
  if (!it->is_object()) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: %s is not an object", file, key));
  }
  if (it->size() > kMaxPatternKeys) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: %s has %d keys (at most %d)", file, key, it->size(), kMaxPatternKeys));
  }
  for (auto e = it->begin(); e != it->end(); ++e) {
    const std::string field = absl::StrFormat("%s[%s]", key, QuoteUntrusted(e.key()));
    if (!e.value().is_number()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: %s is not a number", file, field));
    }
    p.exact.emplace_back(e.key(), e.value().get<double>());
    auto re = CompileAdapterPattern(file, field, "(.*\\.)?(" + e.key() + ")");
    if (!re.ok()) return re.status();
    p.regexes.emplace_back(*std::move(re), e.value().get<double>());
  }
  return p;
}

// A PEFT config key that must be absent/false/null/empty because Loom does not implement
// the feature it turns on.
bool FeatureOn(const Json& cfg, const std::string& key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return false;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_array() || it->is_object() || it->is_string()) return !it->empty();
  if (it->is_number()) return it->get<double>() != 0.0;
  return true;
}

struct TensorName {
  int layer = -1;
  LoraTarget target = LoraTarget::kQ;
  bool is_a = false;
};

// Parses base_model.model.model.layers.N.<self_attn|mlp>.<proj>.lora_<A|B>[.default].weight.
// Returns a FailedPrecondition/InvalidArgument naming the tensor for anything else. Names
// longer than kMaxAdapterTensorNameBytes are refused before any matching.
absl::StatusOr<TensorName> ParseTensorName(const std::string& file, const std::string& name,
                                           int n_layers) {
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: tensor %s: %s", file, QuoteUntrusted(name), why));
  };
  if (name.size() > kMaxAdapterTensorNameBytes) {
    return refuse(absl::StrFormat("name longer than %d bytes", kMaxAdapterTensorNameBytes));
  }
  if (absl::StrContains(name, "lora_magnitude_vector")) {
    return refuse("DoRA (use_dora) is not supported");
  }
  if (absl::StrContains(name, "embed_tokens") || absl::StrContains(name, "lora_embedding")) {
    return refuse("embedding LoRA is not supported");
  }
  if (absl::StrContains(name, "lm_head")) return refuse("lm_head LoRA is not supported");
  if (absl::EndsWith(name, ".bias")) return refuse("LoRA bias terms are not supported");
  static const re2::RE2 kRe(
      R"(base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.([A-Za-z0-9_]+)\.lora_(A|B)(?:\.default)?\.weight)");
  std::string layer_text, parent, module, a_or_b;
  if (!re2::RE2::FullMatch(name, kRe, &layer_text, &parent, &module, &a_or_b)) {
    return refuse("not a LoRA A/B weight of a Llama projection (unsupported tensor)");
  }
  TensorName t;
  int64_t layer = 0;
  if (!absl::SimpleAtoi(layer_text, &layer) || layer > 1000000) return refuse("bad layer number");
  std::optional<LoraTarget> target = LoraTargetFromPeftName(module);
  if (!target.has_value()) {
    return refuse("unknown target module " + QuoteUntrusted(module) +
                  " (Loom supports q_proj k_proj v_proj o_proj gate_proj up_proj down_proj)");
  }
  if (parent != PeftModuleParent(*target)) {
    return refuse("module '" + module + "' is not under '" + parent + "'");
  }
  if (layer >= n_layers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor %s: layer %d, but the base model has %d layers", file,
        QuoteUntrusted(name), layer, n_layers));
  }
  t.layer = static_cast<int>(layer);
  t.target = *target;
  t.is_a = a_or_b == "A";
  return t;
}

// Reader errors as the loader reports them: missing files, size limits and files outside
// the roots keep their codes; anything malformed is a precondition failure.
absl::Status RelabelReaderError(const absl::Status& st) {
  if (st.ok() || absl::IsNotFound(st) || absl::IsResourceExhausted(st) ||
      absl::IsPermissionDenied(st)) {
    return st;
  }
  return absl::FailedPreconditionError(std::string(st.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadPeftAdapter(const std::string& dir,
                                                            const LlamaConfig& base,
                                                            const AdapterLimits& limits) {
  if (absl::Status st = base.Validate(); !st.ok()) {
    return absl::InvalidArgumentError("invalid base config: " + std::string(st.message()));
  }
  struct stat sb;
  if (::stat(dir.c_str(), &sb) != 0) {
    return absl::NotFoundError(absl::StrFormat("%s: no such adapter directory", dir));
  }
  if (!S_ISDIR(sb.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: a PEFT adapter must be a directory", dir));
  }
  const std::string cfg_path = dir + "/adapter_config.json";
  const std::string st_path = dir + "/adapter_model.safetensors";
  if (!IsFile(st_path)) {
    if (IsFile(dir + "/adapter_model.bin")) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s/adapter_model.bin: a PyTorch pickle; Loom loads only adapter_model.safetensors "
          "(re-save with PEFT's save_pretrained(safe_serialization=True))",
          dir));
    }
    return absl::NotFoundError(absl::StrFormat("%s: missing", st_path));
  }
  if (!IsFile(cfg_path)) return absl::NotFoundError(absl::StrFormat("%s: missing", cfg_path));

  // ---- adapter_config.json ----
  auto text = ReadFileToString(cfg_path, kMaxConfigBytes, limits.files);
  if (!text.ok()) return RelabelReaderError(text.status());
  absl::StatusOr<Json> parsed = ParseOrderedJson(*text, cfg_path, kMaxConfigDepth);
  if (!parsed.ok()) return RelabelReaderError(parsed.status());
  const Json cfg = *std::move(parsed);
  if (!cfg.is_object()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: not a JSON object", cfg_path));
  }
  auto bad_cfg = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: %s", cfg_path, why));
  };
  if (auto it = cfg.find("peft_type"); it != cfg.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "LORA") {
      return bad_cfg("peft_type " + Describe(*it) + " is not supported (only LORA)");
    }
  }
  static const std::pair<const char*, const char*> kUnsupported[] = {
      {"use_dora", "DoRA (use_dora)"},
      {"modules_to_save", "modules_to_save (fully trained extra modules)"},
      {"lora_bias", "LoRA bias (lora_bias)"},
      {"layer_replication", "layer_replication"},
      {"trainable_token_indices", "trainable_token_indices (embedding LoRA)"},
      {"target_parameters", "target_parameters"},
      {"use_qalora", "QALoRA (use_qalora)"},
      {"alora_invocation_tokens", "activated LoRA (alora_invocation_tokens)"},
  };
  for (const auto& [key, what] : kUnsupported) {
    if (FeatureOn(cfg, key)) return bad_cfg(std::string(what) + " is not supported by Loom");
  }
  if (auto it = cfg.find("bias"); it != cfg.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "none") {
      return bad_cfg("bias " + Describe(*it) + " is not supported (only \"none\")");
    }
  }
  auto get_num = [&](const char* key, double dflt) -> absl::StatusOr<double> {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return dflt;
    if (!it->is_number()) return bad_cfg(std::string(key) + " is not a number");
    return it->get<double>();
  };
  auto get_bool = [&](const char* key) -> absl::StatusOr<bool> {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return false;
    if (!it->is_boolean()) return bad_cfg(std::string(key) + " is not a boolean");
    return it->get<bool>();
  };
  // PEFT's LoraConfig defaults: r = 8, lora_alpha = 8.
  auto r = get_num("r", 8);
  if (!r.ok()) return r.status();
  auto alpha = get_num("lora_alpha", 8);
  if (!alpha.ok()) return alpha.status();
  auto rslora = get_bool("use_rslora");
  if (!rslora.ok()) return rslora.status();
  auto fifo = get_bool("fan_in_fan_out");
  if (!fifo.ok()) return fifo.status();
  auto rank_pattern = ParsePattern(cfg_path, cfg, "rank_pattern");
  if (!rank_pattern.ok()) return rank_pattern.status();
  auto alpha_pattern = ParsePattern(cfg_path, cfg, "alpha_pattern");
  if (!alpha_pattern.ok()) return alpha_pattern.status();

  ModuleMatcher targets;
  if (auto it = cfg.find("target_modules"); it == cfg.end() || it->is_null()) {
    targets.names = {"q_proj", "v_proj"};  // PEFT's default for Llama
  } else {
    auto m = ParseMatcher(cfg_path, "target_modules", *it);
    if (!m.ok()) return m.status();
    targets = *std::move(m);
  }
  std::optional<ModuleMatcher> excluded;
  if (auto it = cfg.find("exclude_modules"); it != cfg.end() && !it->is_null()) {
    auto m = ParseMatcher(cfg_path, "exclude_modules", *it);
    if (!m.ok()) return m.status();
    excluded = *std::move(m);
  }
  std::set<int> layers;
  if (auto it = cfg.find("layers_to_transform"); it != cfg.end() && !it->is_null()) {
    if (it->is_array() && it->size() > kMaxLayerList) {
      return bad_cfg(absl::StrFormat("layers_to_transform lists %d layers (at most %d)",
                                     it->size(), kMaxLayerList));
    }
    std::vector<Json> items = it->is_array() ? std::vector<Json>(it->begin(), it->end())
                                             : std::vector<Json>{*it};
    for (const Json& e : items) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0) {
        return bad_cfg("layers_to_transform must hold layer numbers");
      }
      if (e.get<int64_t>() >= base.n_layers) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: layers_to_transform names layer %d, but the base model has %d layers",
            cfg_path, e.get<int64_t>(), base.n_layers));
      }
      layers.insert(static_cast<int>(e.get<int64_t>()));
    }
  } else {
    for (int l = 0; l < base.n_layers; ++l) layers.insert(l);
  }

  // Every target_modules entry must name something Loom adapts.
  static const char* kEmbeddingModules[] = {"model.embed_tokens", "lm_head"};
  for (const char* m : kEmbeddingModules) {
    if (targets.Matches(m)) {
      return bad_cfg(absl::StrFormat("target_modules selects '%s': embedding or lm_head LoRA "
                                     "is not supported",
                                     m));
    }
  }
  if (!targets.is_regex()) {
    std::vector<std::string> module_paths;
    for (int l = 0; l < base.n_layers; ++l) {
      for (LoraTarget t : kAllLoraTargets) {
        module_paths.push_back(absl::StrFormat("model.layers.%d.%s.%s", l,
                                               PeftModuleParent(t), PeftModuleName(t)));
      }
    }
    for (const std::string& n : targets.names) {
      ModuleMatcher one;
      one.names = {n};
      bool known = false;
      for (size_t k = 0; k < module_paths.size() && !known; ++k) {
        known = one.Matches(module_paths[k]);
      }
      if (!known) {
        return bad_cfg("unknown target module " + QuoteUntrusted(n) +
                       " (Loom supports q_proj k_proj v_proj o_proj gate_proj up_proj "
                       "down_proj)");
      }
    }
  }

  // Expected projections: selected module paths in selected layers.
  struct Expected {
    int rank = 0;
    float scale = 1.0f;
    const SafetensorsTensor* a = nullptr;
    const SafetensorsTensor* b = nullptr;
  };
  std::map<std::pair<int, LoraTarget>, Expected> expected;
  for (int l : layers) {
    for (LoraTarget t : kAllLoraTargets) {
      const std::string path = absl::StrFormat("model.layers.%d.%s.%s", l, PeftModuleParent(t),
                                               PeftModuleName(t));
      if (!targets.Matches(path) || (excluded.has_value() && excluded->Matches(path))) continue;
      const std::optional<Pattern::Hit> rank_hit = rank_pattern->Lookup(path);
      const std::optional<Pattern::Hit> alpha_hit = alpha_pattern->Lookup(path);
      const double rank_d = rank_hit.has_value() ? rank_hit->value : *r;
      const double alpha_d = alpha_hit.has_value() ? alpha_hit->value : *alpha;
      if (rank_d != std::floor(rank_d) || rank_d < 1) {
        return bad_cfg(absl::StrFormat("rank %g for %s: the rank must be a positive integer",
                                       rank_d, path));
      }
      if (rank_d > limits.max_rank) {
        return bad_cfg(absl::StrFormat("rank %g for %s is above the configured limit %d",
                                       rank_d, path, limits.max_rank));
      }
      const double scale = *rslora ? alpha_d / std::sqrt(rank_d) : alpha_d / rank_d;
      const std::string alpha_field =
          alpha_hit.has_value()
              ? absl::StrFormat("alpha_pattern[%s]", QuoteUntrusted(*alpha_hit->key))
              : std::string("lora_alpha");
      if (absl::Status st = CheckLoraScale(scale, cfg_path, alpha_field, alpha_d, path);
          !st.ok()) {
        return st;
      }
      Expected e;
      e.rank = static_cast<int>(rank_d);
      e.scale = static_cast<float>(scale);
      expected[{l, t}] = e;
    }
  }
  if (expected.empty()) {
    return bad_cfg("target_modules selects none of the base model's projections");
  }

  // ---- adapter_model.safetensors ----
  auto file = SafetensorsFile::Open(st_path, SafetensorsReadOptions{limits.files,
                                                                     kMaxAdapterHeaderBytes});
  if (!file.ok()) return RelabelReaderError(file.status());
  for (const auto& [name, t] : (*file)->tensors()) {
    auto tn = ParseTensorName(st_path, name, base.n_layers);
    if (!tn.ok()) return tn.status();
    auto it = expected.find({tn->layer, tn->target});
    if (it == expected.end()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: tensor %s is for a module that adapter_config.json does not target "
          "(target_modules / exclude_modules / layers_to_transform)",
          st_path, QuoteUntrusted(name)));
    }
    const SafetensorsTensor*& slot = tn->is_a ? it->second.a : it->second.b;
    if (slot != nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: tensors %s and %s hold the same LoRA weight", st_path,
          QuoteUntrusted(slot->name), QuoteUntrusted(name)));
    }
    slot = &t;
  }
  // Every tensor's dtype and shape are checked before the adapter's storage is allocated,
  // so memory follows the bytes the file really holds, not the ranks its config claims.
  // Returns whether the tensor is stored transposed, or the refusal.
  auto check = [&](const SafetensorsTensor* t, int rank, LoraTarget target, int64_t rows,
                   int64_t cols) -> absl::StatusOr<bool> {
    if (!t->dtype.has_value()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: tensor '%s': dtype %s is not supported (F32, F16, BF16)", st_path, t->name,
          QuoteUntrusted(t->dtype_name)));
    }
    const std::vector<int64_t> want = {rows, cols};
    if (t->shape == want) return false;
    if (*fifo && t->shape == std::vector<int64_t>{cols, rows}) return true;
    const ProjectionShape ps = BaseProjectionShape(base, target);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor '%s': expected shape %s (rank %d, base %s %d -> %d), got %s", st_path,
        t->name, ShapeStr(want), rank, PeftModuleName(target), ps.h_in, ps.h_out,
        ShapeStr(t->shape)));
  };
  struct Layout {
    bool a_transposed = false;
    bool b_transposed = false;
  };
  std::map<std::pair<int, LoraTarget>, Layout> layouts;
  std::vector<LoraProjectionInfo> infos;
  for (const auto& [key, e] : expected) {
    const auto [layer, target] = key;
    const std::string stem = "base_model.model." +
                             absl::StrFormat("model.layers.%d.%s.%s", layer,
                                             PeftModuleParent(target), PeftModuleName(target));
    if (e.a == nullptr || e.b == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: missing tensor '%s.lora_%s.weight'", st_path, stem,
                          e.a == nullptr ? "A" : "B"));
    }
    const ProjectionShape ps = BaseProjectionShape(base, target);
    auto ta = check(e.a, e.rank, target, e.rank, ps.h_in);
    if (!ta.ok()) return ta.status();
    auto tb = check(e.b, e.rank, target, ps.h_out, e.rank);
    if (!tb.ok()) return tb.status();
    layouts[key] = Layout{*ta, *tb};
    infos.push_back(LoraProjectionInfo{layer, target, e.rank, e.scale, ps.h_in, ps.h_out});
  }
  auto ad = LoraAdapter::Create(dir, dir, AdapterFormat::kPeft, base.n_layers, infos);
  if (!ad.ok()) return ad.status();
  const bool permute = base.rope_layout == RopeLayout::kAdjacentPairs;
  const auto& projs = (*ad)->projections();
  for (size_t i = 0; i < projs.size(); ++i) {
    const LoraProjectionInfo& p = projs[i];
    const Expected& e = expected.at({p.layer, p.target});
    const Layout& l = layouts.at({p.layer, p.target});
    StoredMatrix a{st_path + ": tensor '" + e.a->name + "'", *e.a->dtype, e.a->data,
                   l.a_transposed};
    StoredMatrix b{st_path + ": tensor '" + e.b->name + "'", *e.b->dtype, e.b->data,
                   l.b_transposed};
    if (absl::Status st = CopyToBf16(a, p.rank, p.h_in, nullptr, (*ad)->mutable_a(i));
        !st.ok()) {
      return st;
    }
    std::function<int64_t(int64_t)> rows;
    if (permute && (p.target == LoraTarget::kQ || p.target == LoraTarget::kK)) {
      const int64_t hd = base.head_dim;
      rows = [hd](int64_t g) { return HfRowOfGgufRow(g, hd); };
    }
    if (absl::Status st = CopyToBf16(b, p.h_out, p.rank, rows, (*ad)->mutable_b(i));
        !st.ok()) {
      return st;
    }
  }
  return ad;
}

}  // namespace loom
