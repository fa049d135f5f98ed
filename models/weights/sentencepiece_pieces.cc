#include "models/weights/sentencepiece_pieces.h"

#include <sentencepiece_processor.h>

namespace loom {

bool ReadSentencePiecePieces(const std::string& serialized, SentencePiecePieces* out,
                             std::string* error) {
  sentencepiece::SentencePieceProcessor sp;
  const auto st = sp.LoadFromSerializedProto(serialized);
  if (!st.ok()) {
    *error = st.ToString();
    return false;
  }
  const int n = sp.GetPieceSize();
  for (int id = 0; id < n; ++id) {
    out->pieces.push_back(sp.IdToPiece(id));
    out->scores.push_back(sp.GetScore(id));
    SentencePiecePieces::Kind k = SentencePiecePieces::kNormal;
    if (sp.IsUnknown(id)) k = SentencePiecePieces::kUnknown;
    else if (sp.IsControl(id)) k = SentencePiecePieces::kControl;
    else if (sp.IsUnused(id)) k = SentencePiecePieces::kUnused;
    else if (sp.IsByte(id)) k = SentencePiecePieces::kByte;
    out->kinds.push_back(k);
  }
  out->bos_id = sp.bos_id();
  out->eos_id = sp.eos_id();
  out->unk_id = sp.unk_id();
  out->pad_id = sp.pad_id();
  return true;
}

}  // namespace loom
