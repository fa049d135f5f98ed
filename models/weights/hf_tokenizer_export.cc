// Vocabulary -> tokenizer.json / tokenizer_config.json (byte-level BPE).
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "models/weights/hf_tokenizer.h"

namespace loom {
namespace {

nlohmann::ordered_json ByteLevel(bool add_prefix_space, bool trim_offsets) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", true}};
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> TokenizerJsonFromVocabulary(const Vocabulary& v) {
  if (v.model != "gpt2") {
    return absl::UnimplementedError(absl::StrFormat(
        "cannot write tokenizer.json for a '%s' vocabulary (only byte-level BPE 'gpt2')",
        v.model));
  }
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  // A std::map-backed object: ordered_json's insert is a linear search (49k tokens).
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const TokenType t = id < v.token_types.size() ? v.token_types[id] : TokenType::kNormal;
    if (t == TokenType::kControl || t == TokenType::kUserDefined) {
      added.push_back({{"id", id},
                       {"content", v.tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", t != TokenType::kControl},
                       {"special", t == TokenType::kControl}});
    }
    vocab[v.tokens[id]] = id;  // a later duplicate text keeps the later id, as HF does
  }
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  if (v.pre == "smollm") {
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Digits"}, {"individual_digits", true}}, ByteLevel(false, true)}}};
  } else {
    j["pre_tokenizer"] = ByteLevel(false, true);
  }
  j["post_processor"] = ByteLevel(true, false);
  j["decoder"] = ByteLevel(true, true);
  nlohmann::ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  model["vocab"] = nlohmann::ordered_json(vocab);
  model["merges"] = v.merges;
  j["model"] = std::move(model);
  return j;
}

nlohmann::ordered_json TokenizerConfigFromVocabulary(const Vocabulary& v, int max_context) {
  nlohmann::ordered_json j;
  j["add_bos_token"] = v.add_bos;
  j["add_eos_token"] = v.add_eos;
  auto token = [&](int32_t id) -> nlohmann::ordered_json {
    if (id < 0 || static_cast<size_t>(id) >= v.tokens.size()) return nullptr;
    return v.tokens[id];
  };
  j["bos_token"] = token(v.bos_id);
  j["eos_token"] = token(v.eos_id);
  j["unk_token"] = token(v.unk_id);
  j["pad_token"] = token(v.pad_id);
  if (!v.chat_template.empty()) j["chat_template"] = v.chat_template;
  j["clean_up_tokenization_spaces"] = false;
  j["model_max_length"] = max_context;
  j["tokenizer_class"] = "GPT2Tokenizer";
  return j;
}

}  // namespace loom
