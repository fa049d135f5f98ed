// SentencePiece tokenizer (Vocabulary::model == "llama") backed by Debian's
// libsentencepiece, loaded from the serialized ModelProto in
// Vocabulary::sentencepiece_model (a tokenizer.model file's bytes). Ids equal
// `spm_encode --output_format=id` on the same model.
#ifndef LOOM_MODELS_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
#define LOOM_MODELS_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/tokenizer/sentencepiece_shim.h"
#include "models/tokenizer/tokenizer.h"

namespace loom {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Uses vocab.sentencepiece_model when present; otherwise (GGUF "llama" vocabularies)
  // builds a BPE ModelProto from tokens/scores/types (sentencepiece_proto.h).
  // FailedPrecondition when there is neither; InvalidArgument when the model does not load. The processor's
  // pieces, types, bos and eos define the tokenizer; vocab.tokens is not consulted.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Create(
      const Vocabulary& vocab);
  ~SentencePieceTokenizer() override;

  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                     bool render_control = false) const override;
  bool adds_dummy_prefix() const override { return dummy_prefix_; }

 protected:
  absl::Status EncodeFragment(std::string_view text,
                              std::vector<int32_t>* out) const override;
  bool SplitUserDefinedInUserText() const override { return false; }

 private:
  SentencePieceTokenizer(const Vocabulary& vocab,
                         std::unique_ptr<spm::Processor> sp,
                         bool dummy_prefix);
  std::unique_ptr<spm::Processor> sp_;
  bool dummy_prefix_;
};

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
