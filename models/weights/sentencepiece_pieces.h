// The pieces of a serialized SentencePiece model, read with libsentencepiece. This header
// and its .cc include no Abseil: Debian's sentencepiece header declares its own
// absl::string_view, which clashes with Abseil's.
#ifndef LOOM_MODELS_WEIGHTS_SENTENCEPIECE_PIECES_H_
#define LOOM_MODELS_WEIGHTS_SENTENCEPIECE_PIECES_H_

#include <string>
#include <vector>

namespace loom {

struct SentencePiecePieces {
  enum Kind { kNormal, kUnknown, kControl, kUnused, kByte };
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<Kind> kinds;
  int bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
};

// False with *error set if `serialized` is not a SentencePiece ModelProto.
bool ReadSentencePiecePieces(const std::string& serialized, SentencePiecePieces* out,
                             std::string* error);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_SENTENCEPIECE_PIECES_H_
