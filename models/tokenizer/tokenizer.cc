#include "models/tokenizer/tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/tokenizer/byte_level_bpe.h"
#include "models/tokenizer/sentencepiece_tokenizer.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

constexpr std::string_view kEndOfTurnTexts[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(const Vocabulary& vocab) {
  if (vocab.model == "gpt2") {
    auto bpe = ByteLevelBpe::Create(vocab);
    if (!bpe.ok()) return bpe.status();
    return std::unique_ptr<Tokenizer>(std::move(*bpe));
  }
  if (vocab.model == "llama") {
    auto spm = SentencePieceTokenizer::Create(vocab);
    if (!spm.ok()) return spm.status();
    return std::unique_ptr<Tokenizer>(std::move(*spm));
  }
  return absl::UnimplementedError(
      absl::StrCat("tokenizer model \"", vocab.model, "\" is not supported"));
}

Tokenizer::Tokenizer(const Vocabulary& vocab) : types_(vocab.token_types) {
  const int32_t n = static_cast<int32_t>(vocab.tokens.size());
  types_.resize(n, TokenType::kNormal);
  token_text_ = vocab.tokens;
  bos_id_ = (vocab.bos_id >= 0 && vocab.bos_id < n) ? vocab.bos_id : -1;
  eos_id_ = (vocab.eos_id >= 0 && vocab.eos_id < n) ? vocab.eos_id : -1;
  for (int32_t id = 0; id < n; ++id) {
    const bool special =
        types_[id] == TokenType::kControl || types_[id] == TokenType::kUserDefined;
    if (!special || vocab.tokens[id].empty()) continue;
    specials_by_length_.push_back(id);
    special_by_text_.emplace(vocab.tokens[id], id);
  }
  std::stable_sort(specials_by_length_.begin(), specials_by_length_.end(),
                   [&](int32_t a, int32_t b) {
                     return vocab.tokens[a].size() > vocab.tokens[b].size();
                   });
  if (eos_id_ >= 0) eog_ids_.push_back(eos_id_);
  for (std::string_view text : kEndOfTurnTexts) {
    auto it = special_by_text_.find(absl::string_view(text.data(), text.size()));
    if (it != special_by_text_.end() && types_[it->second] == TokenType::kControl &&
        std::find(eog_ids_.begin(), eog_ids_.end(), it->second) == eog_ids_.end()) {
      eog_ids_.push_back(it->second);
    }
  }
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                       bool add_bos) const {
  return EncodeImpl(text, add_bos, /*parse_control=*/false);
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeWithSpecial(std::string_view text,
                                                                  bool add_bos) const {
  return EncodeImpl(text, add_bos, /*parse_control=*/true);
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeImpl(std::string_view text,
                                                           bool add_bos,
                                                           bool parse_control) const {
  std::vector<int32_t> ids;
  if (add_bos) {
    if (bos_id_ < 0) return absl::FailedPreconditionError("vocabulary has no BOS token");
    ids.push_back(bos_id_);
  }
  std::string sanitized;
  if (!utf8::IsValid(text)) {
    sanitized = utf8::Sanitize(text);
    text = sanitized;
  }
  // Fragments in order: either raw text (id == -1) or a special token id. Each special
  // token, longest first, splits every raw fragment at its occurrences (llama.cpp's
  // tokenizer_st_partition).
  struct Fragment {
    int32_t id;
    std::string_view text;
  };
  std::vector<Fragment> frags{{-1, text}}, next;
  const bool split_user_defined = parse_control || SplitUserDefinedInUserText();
  for (int32_t sid : specials_by_length_) {
    const bool control = types_[sid] == TokenType::kControl;
    if (control ? !parse_control : !split_user_defined) continue;
    const std::string& needle = token_text_[sid];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      while (true) {
        const size_t hit = f.text.find(needle, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, f.text.substr(pos, hit - pos)});
        next.push_back({sid, {}});
        pos = hit + needle.size();
      }
      if (pos < f.text.size()) next.push_back({-1, f.text.substr(pos)});
    }
    frags.swap(next);
  }
  for (const Fragment& f : frags) {
    if (f.id >= 0) {
      ids.push_back(f.id);
    } else if (!f.text.empty()) {
      absl::Status s = EncodeFragment(f.text, &ids);
      if (!s.ok()) return s;
    }
  }
  return ids;
}

absl::StatusOr<std::string_view> Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
  }
  return std::string_view(token_bytes_[id]);
}

absl::StatusOr<std::string_view> Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
  }
  return std::string_view(token_text_[id]);
}

absl::StatusOr<std::string> Tokenizer::Decode(const std::vector<int32_t>& ids,
                                              bool render_control) const {
  std::string bytes;
  for (int32_t id : ids) {
    auto b = TokenBytes(id);
    if (!b.ok()) return b.status();
    if (IsControl(id) && !render_control) continue;
    bytes.append(b->data(), b->size());
  }
  return utf8::Sanitize(bytes);
}

bool Tokenizer::IsControl(int32_t id) const {
  return id >= 0 && id < vocab_size() && types_[id] == TokenType::kControl;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

std::optional<int32_t> Tokenizer::SpecialTokenId(std::string_view text) const {
  auto it = special_by_text_.find(absl::string_view(text.data(), text.size()));
  if (it == special_by_text_.end()) return std::nullopt;
  return it->second;
}

}  // namespace loom
