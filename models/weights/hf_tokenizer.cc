#include "models/weights/hf_tokenizer.h"

#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace loom {
namespace {

constexpr int64_t kMaxTokenId = int64_t{1} << 22;

// j[key] if it is a string (or bool), else `def`: never throws on a wrong type.
std::string Str(const nlohmann::json& j, const char* key, const std::string& def) {
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : def;
}
bool Flag(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: %s", path, what));
}

// Puts `text` at `id`, growing the vectors; `types` filled with kUnused for gaps.
absl::Status PutToken(Vocabulary* v, std::vector<bool>* set, int64_t id, std::string text,
                      TokenType type, const std::string& path) {
  if (id < 0 || id >= kMaxTokenId) return Bad(path, absl::StrCat("token id ", id, " out of range"));
  if (static_cast<size_t>(id) >= v->tokens.size()) {
    v->tokens.resize(id + 1);
    v->token_types.resize(id + 1, TokenType::kUnused);
    set->resize(id + 1, false);
  }
  v->tokens[id] = std::move(text);
  v->token_types[id] = type;
  (*set)[id] = true;
  return absl::OkStatus();
}

bool IsSmolLmPreTokenizer(const nlohmann::json& pre) {
  if (!pre.is_object() || Str(pre, "type", "") != "Sequence") return false;
  auto list = pre.find("pretokenizers");
  if (list == pre.end() || !list->is_array() || list->size() != 2) return false;
  const nlohmann::json& d = (*list)[0];
  const nlohmann::json& b = (*list)[1];
  if (!d.is_object() || !b.is_object()) return false;
  return Str(d, "type", "") == "Digits" && Flag(d, "individual_digits") &&
         Str(b, "type", "") == "ByteLevel";
}

// Resolves a special-token field (string or {"content": string}) to an id; -1 if absent.
absl::Status SpecialToken(const nlohmann::json& j, const char* key, const std::string& path,
                          const std::unordered_map<std::string, int>& ids, int32_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    text = (*it)["content"].get<std::string>();
  } else {
    return Bad(path, absl::StrCat("'", key, "' must be a string or {\"content\": string}"));
  }
  auto id = ids.find(text);
  if (id == ids.end()) {
    return Bad(path, absl::StrCat("'", key, "' = '", text, "' is not a token"));
  }
  *out = id->second;
  return absl::OkStatus();
}

absl::Status BoolField(const nlohmann::json& j, const char* key, const std::string& path,
                       bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(path, absl::StrCat("'", key, "' must be a bool"));
  *out = it->get<bool>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Vocabulary> VocabularyFromTokenizerJson(const nlohmann::json& j,
                                                       const std::string& path) {
  auto model = j.find("model");
  if (model == j.end() || !model->is_object()) return Bad(path, "missing 'model' object");
  const std::string type = Str(*model, "type", "BPE");
  if (type != "BPE") {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: tokenizer model type '%s' is not supported (only BPE)", path, type));
  }
  auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) return Bad(path, "missing model.vocab");
  Vocabulary v;
  v.model = "gpt2";
  std::vector<bool> set;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return Bad(path, absl::StrCat("model.vocab['", it.key(), "'] is not an integer id"));
    }
    const int64_t id = it.value().get<int64_t>();
    if (id >= 0 && static_cast<size_t>(id) < set.size() && set[id]) {
      return Bad(path, absl::StrCat("token id ", id, " appears twice in model.vocab"));
    }
    if (auto s = PutToken(&v, &set, id, it.key(), TokenType::kNormal, path); !s.ok()) return s;
  }
  if (auto added = j.find("added_tokens"); added != j.end() && !added->is_null()) {
    if (!added->is_array()) return Bad(path, "'added_tokens' is not an array");
    for (const nlohmann::json& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        return Bad(path, "an added_tokens entry lacks an integer id or string content");
      }
      const bool special = Flag(a, "special");
      if (auto s = PutToken(&v, &set, a["id"].get<int64_t>(), a["content"].get<std::string>(),
                            special ? TokenType::kControl : TokenType::kUserDefined, path);
          !s.ok()) {
        return s;
      }
    }
  }
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (!set[id]) v.tokens[id] = absl::StrCat("[PAD", id, "]");
  }
  if (auto merges = model->find("merges"); merges != model->end() && !merges->is_null()) {
    if (!merges->is_array()) return Bad(path, "model.merges is not an array");
    v.merges.reserve(merges->size());
    for (const nlohmann::json& m : *merges) {
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        v.merges.push_back(absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
      } else {
        return Bad(path, absl::StrCat("merge #", v.merges.size(),
                                      " is neither \"a b\" nor [\"a\", \"b\"]"));
      }
    }
  }
  auto pre = j.find("pre_tokenizer");
  v.pre = (pre != j.end() && IsSmolLmPreTokenizer(*pre)) ? "smollm" : "gpt2";
  v.add_bos = false;
  return v;
}

absl::Status ApplyTokenizerConfig(const nlohmann::json& j, const std::string& path,
                                  Vocabulary* v) {
  std::unordered_map<std::string, int> ids;
  for (size_t k = 0; k < v->tokens.size(); ++k) ids.emplace(v->tokens[k], static_cast<int>(k));
  if (auto s = SpecialToken(j, "bos_token", path, ids, &v->bos_id); !s.ok()) return s;
  if (auto s = SpecialToken(j, "eos_token", path, ids, &v->eos_id); !s.ok()) return s;
  if (auto s = SpecialToken(j, "unk_token", path, ids, &v->unk_id); !s.ok()) return s;
  if (auto s = SpecialToken(j, "pad_token", path, ids, &v->pad_id); !s.ok()) return s;
  if (auto s = BoolField(j, "add_bos_token", path, &v->add_bos); !s.ok()) return s;
  if (auto s = BoolField(j, "add_eos_token", path, &v->add_eos); !s.ok()) return s;
  if (auto t = j.find("chat_template"); t != j.end() && !t->is_null()) {
    if (t->is_string()) {
      v->chat_template = t->get<std::string>();
    } else if (t->is_array()) {
      for (const nlohmann::json& e : *t) {
        if (e.is_object() && Str(e, "name", "") == "default" && e.contains("template") &&
            e["template"].is_string()) {
          v->chat_template = e["template"].get<std::string>();
        }
      }
    } else {
      return Bad(path, "'chat_template' must be a string or a list");
    }
  }
  return absl::OkStatus();
}

absl::Status ApplySpecialIds(const nlohmann::json& j, const std::string& path, Vocabulary* v) {
  struct { const char* key; int32_t* out; } fields[] = {{"bos_token_id", &v->bos_id},
                                                        {"eos_token_id", &v->eos_id}};
  for (const auto& f : fields) {
    if (*f.out >= 0) continue;
    auto it = j.find(f.key);
    if (it == j.end() || it->is_null()) continue;
    const nlohmann::json* x = &*it;
    if (x->is_array()) {
      if (x->empty()) continue;
      x = &(*x)[0];
    }
    if (!x->is_number_integer()) return Bad(path, absl::StrCat("'", f.key, "' is not an integer"));
    const int64_t id = x->get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(v->tokens.size())) {
      return Bad(path, absl::StrFormat("'%s' = %d is outside the vocabulary (%d tokens)", f.key,
                                       id, v->tokens.size()));
    }
    *f.out = static_cast<int32_t>(id);
  }
  return absl::OkStatus();
}

absl::Status PadVocabulary(int vocab_size, const std::string& path, Vocabulary* v) {
  if (v->tokens.size() > static_cast<size_t>(vocab_size)) {
    return Bad(path, absl::StrFormat("the tokenizer has %d tokens but the model only %d "
                                     "embeddings (vocab_size)", v->tokens.size(), vocab_size));
  }
  for (size_t id = v->tokens.size(); id < static_cast<size_t>(vocab_size); ++id) {
    v->tokens.push_back(absl::StrCat("[PAD", id, "]"));
    v->token_types.push_back(TokenType::kUnused);
    if (!v->scores.empty()) v->scores.push_back(0.0f);
  }
  return absl::OkStatus();
}

}  // namespace loom
