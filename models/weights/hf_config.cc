#include "models/weights/hf_config.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace loom {
namespace {

absl::Status IntField(const nlohmann::json& j, const std::string& path, const char* key,
                      bool required, int* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat("%s: missing key '%s'", path, key));
  }
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: '%s' must be an integer", path, key));
  }
  const int64_t v = it->get<int64_t>();
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: '%s' = %d is out of range", path, key, v));
  }
  *out = static_cast<int>(v);
  return absl::OkStatus();
}

absl::Status FloatField(const nlohmann::json& j, const std::string& path, const char* key,
                        bool required, float* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat("%s: missing key '%s'", path, key));
  }
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: '%s' must be a number", path, key));
  }
  *out = it->get<float>();
  return absl::OkStatus();
}

// The shortest decimal that reads back as exactly `f` (so 1e-5f is written "1e-05", not
// "9.999999747378752e-06"), as a JSON number.
nlohmann::ordered_json ShortFloat(float f) {
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

}  // namespace

absl::StatusOr<LlamaConfig> LlamaConfigFromHfJson(const nlohmann::json& j,
                                                  const std::string& path,
                                                  const std::string& name) {
  bool llama = false;
  if (auto a = j.find("architectures"); a != j.end() && a->is_array()) {
    for (const auto& x : *a) llama |= x.is_string() && x.get<std::string>() == "LlamaForCausalLM";
  }
  if (!llama) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: 'architectures' does not include LlamaForCausalLM (only Llama is supported)",
        path));
  }
  if (auto r = j.find("rope_scaling"); r != j.end() && !r->is_null()) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: rope_scaling %s is not supported", path, r->dump()));
  }
  for (const char* k : {"attention_bias", "mlp_bias"}) {
    if (auto b = j.find(k); b != j.end() && b->is_boolean() && b->get<bool>()) {
      return absl::UnimplementedError(absl::StrFormat("%s: %s = true is not supported", path, k));
    }
  }
  LlamaConfig c;
  c.name = name;
  struct { const char* key; bool required; int* out; } ints[] = {
      {"hidden_size", true, &c.hidden},
      {"intermediate_size", true, &c.intermediate},
      {"num_hidden_layers", true, &c.n_layers},
      {"num_attention_heads", true, &c.n_heads},
      {"vocab_size", true, &c.vocab_size},
      {"max_position_embeddings", false, &c.max_context},
  };
  for (const auto& f : ints) {
    if (absl::Status s = IntField(j, path, f.key, f.required, f.out); !s.ok()) return s;
  }
  c.n_kv_heads = c.n_heads;
  if (absl::Status s = IntField(j, path, "num_key_value_heads", false, &c.n_kv_heads); !s.ok()) {
    return s;
  }
  c.head_dim = c.n_heads > 0 ? c.hidden / c.n_heads : 0;
  if (absl::Status s = IntField(j, path, "head_dim", false, &c.head_dim); !s.ok()) return s;
  if (absl::Status s = FloatField(j, path, "rms_norm_eps", true, &c.rms_eps); !s.ok()) return s;
  if (absl::Status s = FloatField(j, path, "rope_theta", false, &c.rope_theta); !s.ok()) return s;
  if (auto t = j.find("tie_word_embeddings"); t != j.end() && !t->is_null()) {
    if (!t->is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: 'tie_word_embeddings' must be a bool", path));
    }
    c.tied_embeddings = t->get<bool>();
  }
  c.rope_layout = RopeLayout::kHalves;
  return c;
}

nlohmann::ordered_json HfJsonFromLlamaConfig(const LlamaConfig& c, const std::string& torch_dtype,
                                             int bos_id, int eos_id) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.hidden;
  j["intermediate_size"] = c.intermediate;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = ShortFloat(c.rms_eps);
  j["rope_theta"] = ShortFloat(c.rope_theta);
  j["rope_scaling"] = nullptr;
  j["max_position_embeddings"] = c.max_context;
  j["vocab_size"] = c.vocab_size;
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  if (bos_id >= 0) j["bos_token_id"] = bos_id;
  if (eos_id >= 0) j["eos_token_id"] = eos_id;
  j["torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace loom
