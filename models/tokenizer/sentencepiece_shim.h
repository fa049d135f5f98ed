// A std-only facade over sentencepiece::SentencePieceProcessor. Debian's
// sentencepiece_processor.h declares `absl::string_view` as std::string_view, which
// collides with Debian's Abseil (built with its own absl::string_view), so the two
// headers never meet in one translation unit: only sentencepiece_shim.cc includes it.
#ifndef LOOM_MODELS_TOKENIZER_SENTENCEPIECE_SHIM_H_
#define LOOM_MODELS_TOKENIZER_SENTENCEPIECE_SHIM_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom::spm {

enum class PieceKind { kNormal, kControl, kUnknown, kUnused, kByte };

class Processor {
 public:
  // Loads a serialized ModelProto. nullptr with *error set on failure.
  static std::unique_ptr<Processor> Load(std::string_view serialized_proto,
                                         std::string* error);
  ~Processor();

  // false with *error set on failure.
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;

  int size() const;
  std::string Piece(int id) const;
  float Score(int id) const;
  PieceKind Kind(int id) const;
  int bos_id() const;
  int eos_id() const;
  int unk_id() const;

 private:
  struct Impl;
  explicit Processor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::spm

#endif  // LOOM_MODELS_TOKENIZER_SENTENCEPIECE_SHIM_H_
