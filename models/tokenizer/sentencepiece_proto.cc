#include "models/tokenizer/sentencepiece_proto.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace loom {
namespace {

// Protobuf wire format: tag = field << 3 | wire type (0 varint, 2 bytes, 5 fixed32).
void Varint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void Tag(int field, int wire, std::string* out) { Varint((field << 3) | wire, out); }
void IntField(int field, int64_t v, std::string* out) {
  Tag(field, 0, out);
  Varint(static_cast<uint64_t>(v), out);  // negative int32: 10-byte two's complement
}
void BytesField(int field, const std::string& v, std::string* out) {
  Tag(field, 2, out);
  Varint(v.size(), out);
  out->append(v);
}
void FloatField(int field, float v, std::string* out) {
  Tag(field, 5, out);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(bits >> (8 * i)));
}

// sentencepiece_model.proto SentencePiece.Type.
int PieceType(TokenType t) {
  switch (t) {
    case TokenType::kUnknown: return 2;
    case TokenType::kControl: return 3;
    case TokenType::kUserDefined: return 4;
    case TokenType::kUnused: return 5;
    case TokenType::kByte: return 6;
    default: return 1;  // NORMAL
  }
}

}  // namespace

absl::StatusOr<std::string> SentencePieceProtoFromVocabulary(const Vocabulary& vocab) {
  const size_t n = vocab.tokens.size();
  if (vocab.token_types.size() != n || (!vocab.scores.empty() && vocab.scores.size() != n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SentencePiece vocabulary: ", n, " tokens, ", vocab.token_types.size(), " types, ",
        vocab.scores.size(), " scores"));
  }
  int unknown = 0;
  bool has_bytes = false;
  std::string proto;
  for (size_t i = 0; i < n; ++i) {
    unknown += vocab.token_types[i] == TokenType::kUnknown;
    has_bytes |= vocab.token_types[i] == TokenType::kByte;
    std::string piece;
    BytesField(1, vocab.tokens[i], &piece);
    FloatField(2, vocab.scores.empty() ? 0.0f : vocab.scores[i], &piece);
    IntField(3, PieceType(vocab.token_types[i]), &piece);
    BytesField(1, piece, &proto);  // ModelProto.pieces
  }
  if (unknown != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SentencePiece vocabulary needs exactly one unknown token, has ", unknown));
  }
  std::string trainer;
  IntField(3, 2, &trainer);  // model_type = BPE
  if (has_bytes) IntField(35, 1, &trainer);  // byte_fallback
  for (size_t i = 0; i < n; ++i) {
    if (vocab.token_types[i] == TokenType::kUnknown) IntField(40, i, &trainer);  // unk_id
  }
  IntField(41, vocab.bos_id, &trainer);
  IntField(42, vocab.eos_id, &trainer);
  IntField(43, vocab.pad_id, &trainer);
  BytesField(2, trainer, &proto);
  std::string normalizer;
  BytesField(1, "identity", &normalizer);
  IntField(3, 1, &normalizer);  // add_dummy_prefix
  IntField(4, 0, &normalizer);  // remove_extra_whitespaces
  IntField(5, 1, &normalizer);  // escape_whitespaces
  BytesField(3, normalizer, &proto);
  return proto;
}

}  // namespace loom
