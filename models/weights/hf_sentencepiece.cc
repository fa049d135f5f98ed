// VocabularyFromSentencePiece over the Abseil-free SentencePiece shim.
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "models/weights/hf_tokenizer.h"
#include "models/weights/sentencepiece_pieces.h"

namespace loom {

absl::StatusOr<Vocabulary> VocabularyFromSentencePiece(const std::string& bytes,
                                                       const std::string& path) {
  SentencePiecePieces p;
  std::string error;
  if (!ReadSentencePiecePieces(bytes, &p, &error)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not a SentencePiece model: %s", path, error));
  }
  Vocabulary v;
  v.model = "llama";
  v.tokens = std::move(p.pieces);
  v.scores = std::move(p.scores);
  for (SentencePiecePieces::Kind k : p.kinds) {
    switch (k) {
      case SentencePiecePieces::kUnknown: v.token_types.push_back(TokenType::kUnknown); break;
      case SentencePiecePieces::kControl: v.token_types.push_back(TokenType::kControl); break;
      case SentencePiecePieces::kUnused: v.token_types.push_back(TokenType::kUnused); break;
      case SentencePiecePieces::kByte: v.token_types.push_back(TokenType::kByte); break;
      default: v.token_types.push_back(TokenType::kNormal); break;
    }
  }
  v.bos_id = p.bos_id;
  v.eos_id = p.eos_id;
  v.unk_id = p.unk_id;
  v.pad_id = p.pad_id;
  v.add_bos = true;
  v.sentencepiece_model = bytes;
  return v;
}

}  // namespace loom
