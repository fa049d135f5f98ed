#include "models/tokenizer/sentencepiece_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "models/tokenizer/sentencepiece_proto.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Parses "<0xNN>" into its byte value; -1 if `piece` is not of that form.
int ParseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int v = 0;
  for (char c : piece.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else return -1;
  }
  return v;
}

// A Vocabulary describing the processor's own pieces, so that the Tokenizer base class
// (types, bos/eos, special-token table) agrees with what SentencePiece emits.
Vocabulary VocabularyOf(const spm::Processor& sp) {
  Vocabulary v;
  v.model = "llama";
  const int n = sp.size();
  v.tokens.reserve(n);
  v.token_types.reserve(n);
  for (int id = 0; id < n; ++id) {
    v.tokens.push_back(sp.Piece(id));
    TokenType t = TokenType::kNormal;
    switch (sp.Kind(id)) {
      case spm::PieceKind::kControl: t = TokenType::kControl; break;
      case spm::PieceKind::kUnknown: t = TokenType::kUnknown; break;
      case spm::PieceKind::kUnused: t = TokenType::kUnused; break;
      case spm::PieceKind::kByte: t = TokenType::kByte; break;
      case spm::PieceKind::kNormal: break;
    }
    v.token_types.push_back(t);
  }
  v.bos_id = sp.bos_id();
  v.eos_id = sp.eos_id();
  v.unk_id = sp.unk_id();
  return v;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(
    const Vocabulary& vocab, std::unique_ptr<spm::Processor> sp,
    bool dummy_prefix)
    : Tokenizer(vocab), sp_(std::move(sp)), dummy_prefix_(dummy_prefix) {
  token_bytes_.resize(vocab.tokens.size());
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const std::string& piece = vocab.tokens[id];
    const int byte = types_[id] == TokenType::kByte ? ParseBytePiece(piece) : -1;
    if (byte >= 0) {
      token_bytes_[id] = std::string(1, static_cast<char>(byte));
      continue;
    }
    std::string bytes;
    size_t pos = 0;
    while (pos < piece.size()) {
      if (piece.compare(pos, kSpace.size(), kSpace) == 0) {
        bytes.push_back(' ');
        pos += kSpace.size();
      } else {
        bytes.push_back(piece[pos++]);
      }
    }
    token_bytes_[id] = std::move(bytes);
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Create(
    const Vocabulary& vocab) {
  std::string built;
  if (vocab.sentencepiece_model.empty()) {
    if (vocab.tokens.empty()) {
      return absl::FailedPreconditionError(
          "SentencePiece vocabulary has neither a serialized model nor tokens");
    }
    auto proto = SentencePieceProtoFromVocabulary(vocab);
    if (!proto.ok()) return proto.status();
    built = std::move(*proto);
  }
  const std::string& serialized = built.empty() ? vocab.sentencepiece_model : built;
  std::string error;
  std::unique_ptr<spm::Processor> sp = spm::Processor::Load(serialized, &error);
  if (sp == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load SentencePiece model: ", error));
  }
  // Whether the normalizer prepends "▁": encode "a" and look at the first piece.
  bool dummy_prefix = false;
  std::vector<int> ids;
  if (sp->Encode("a", &ids, &error) && !ids.empty()) {
    dummy_prefix = std::string_view(sp->Piece(ids[0])).substr(0, kSpace.size()) == kSpace;
  }
  const Vocabulary own = VocabularyOf(*sp);
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(own, std::move(sp), dummy_prefix));
}

absl::Status SentencePieceTokenizer::EncodeFragment(std::string_view text,
                                                    std::vector<int32_t>* out) const {
  std::vector<int> ids;
  std::string error;
  if (!sp_->Encode(text, &ids, &error)) {
    return absl::InternalError(absl::StrCat("SentencePiece encode: ", error));
  }
  out->insert(out->end(), ids.begin(), ids.end());
  return absl::OkStatus();
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids,
                                                           bool render_control) const {
  if (render_control) return Tokenizer::Decode(ids, render_control);
  std::vector<int> plain;
  plain.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
    }
    plain.push_back(id);
  }
  std::string text, error;
  if (!sp_->Decode(plain, &text, &error)) {
    return absl::InternalError(absl::StrCat("SentencePiece decode: ", error));
  }
  return utf8::Sanitize(text);
}

}  // namespace loom
