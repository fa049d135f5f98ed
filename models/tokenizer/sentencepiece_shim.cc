// Only file that includes the SentencePiece header (see sentencepiece_shim.h).
#include "models/tokenizer/sentencepiece_shim.h"

#include <sentencepiece_processor.h>

namespace loom::spm {

struct Processor::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

Processor::Processor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Processor::~Processor() = default;

std::unique_ptr<Processor> Processor::Load(std::string_view serialized_proto,
                                           std::string* error) {
  auto impl = std::make_unique<Impl>();
  const auto status = impl->sp.LoadFromSerializedProto(serialized_proto);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<Processor>(new Processor(std::move(impl)));
}

bool Processor::Encode(std::string_view text, std::vector<int>* ids,
                       std::string* error) const {
  const auto status = impl_->sp.Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool Processor::Decode(const std::vector<int>& ids, std::string* text,
                       std::string* error) const {
  const auto status = impl_->sp.Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int Processor::size() const { return impl_->sp.GetPieceSize(); }
std::string Processor::Piece(int id) const { return impl_->sp.IdToPiece(id); }
float Processor::Score(int id) const { return impl_->sp.GetScore(id); }

PieceKind Processor::Kind(int id) const {
  if (impl_->sp.IsControl(id)) return PieceKind::kControl;
  if (impl_->sp.IsUnknown(id)) return PieceKind::kUnknown;
  if (impl_->sp.IsUnused(id)) return PieceKind::kUnused;
  if (impl_->sp.IsByte(id)) return PieceKind::kByte;
  return PieceKind::kNormal;
}

int Processor::bos_id() const { return impl_->sp.bos_id(); }
int Processor::eos_id() const { return impl_->sp.eos_id(); }
int Processor::unk_id() const { return impl_->sp.unk_id(); }

}  // namespace loom::spm
