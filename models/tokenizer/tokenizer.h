// Text <-> token ids for a model's vocabulary.
//
// Two entry points encode text, and the difference is a security boundary:
//   - Encode: untrusted (user) text. Control tokens are NEVER recognised: the characters
//     "<|im_start|>" in user text become ordinary text tokens, so a user cannot forge a
//     turn boundary.
//   - EncodeWithSpecial: trusted text written by Loom itself (the chat template), in which
//     the literal text of a control token becomes that token's id.
// For byte-level BPE, ids equal llama.cpp's `llama_tokenize(..., parse_special)` for the
// same flag (including its treatment of user-defined added tokens, which llama.cpp splits
// out of any text).
#ifndef LOOM_MODELS_TOKENIZER_TOKENIZER_H_
#define LOOM_MODELS_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/tokenizer/vocabulary.h"

namespace loom {

class Tokenizer {
 public:
  // "gpt2" -> byte-level BPE (pre-tokenizer from vocab.pre); "llama" -> SentencePiece
  // from vocab.sentencepiece_model (a serialized ModelProto) or, when that is empty, from
  // tokens/scores/types as a score-ranked BPE model. Anything else: Unimplemented.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(const Vocabulary& vocab);

  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Untrusted text -> ids; prepends bos_id() when add_bos (FailedPrecondition if the
  // vocabulary has no BOS). Ill-formed UTF-8 bytes are tokenized as U+FFFD (as llama.cpp
  // does). Thread-safe.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_bos) const;

  // Trusted text -> ids, where the literal text of control (and user-defined) tokens maps
  // to their ids. Only for text Loom composes (chat template); never for user content.
  absl::StatusOr<std::vector<int32_t>> EncodeWithSpecial(std::string_view text,
                                                         bool add_bos) const;

  // The raw bytes a token stands for (byte-level decoding applied; SentencePiece "▁" as
  // " " and <0xNN> byte pieces as that byte). A control token's bytes are its literal
  // text (e.g. "<|im_end|>"). May be a partial UTF-8 character. InvalidArgument when id
  // is out of range.
  absl::StatusOr<std::string_view> TokenBytes(int32_t id) const;

  // The token's text as stored in the vocabulary (GPT-2 byte-to-unicode encoded for BPE).
  absl::StatusOr<std::string_view> TokenText(int32_t id) const;

  // Concatenated bytes of `ids` as well-formed UTF-8 (ill-formed sequences become U+FFFD).
  // Control tokens contribute nothing unless `render_control`. SentencePiece removes the
  // leading space of the dummy prefix. InvalidArgument on an out-of-range id.
  virtual absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                             bool render_control = false) const;

  int32_t vocab_size() const { return static_cast<int32_t>(types_.size()); }
  int32_t bos_id() const { return bos_id_; }  // -1 when none
  int32_t eos_id() const { return eos_id_; }  // -1 when none
  bool IsControl(int32_t id) const;
  // Generation stops at these: eos and, when present, ChatML/common end-of-turn markers
  // (<|im_end|>, <|endoftext|>, <|eot_id|>, <|end|>, <end_of_turn>, <|eom_id|>).
  bool IsEndOfGeneration(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }
  // The id of the control or user-defined token whose text is exactly `text`.
  std::optional<int32_t> SpecialTokenId(std::string_view text) const;
  // True for SentencePiece models that prepend a dummy "▁" to the text: the first decoded
  // token of a sequence then carries one extra leading space that Decode removes.
  virtual bool adds_dummy_prefix() const { return false; }

 protected:
  explicit Tokenizer(const Vocabulary& vocab);

  // Encodes one fragment of plain text (no special-token parsing) and appends its ids.
  // `text` is well-formed UTF-8.
  virtual absl::Status EncodeFragment(std::string_view text,
                                      std::vector<int32_t>* out) const = 0;

  // Whether user-defined tokens are split out of untrusted text before EncodeFragment
  // (llama.cpp does this for BPE vocabularies; SentencePiece handles them itself).
  virtual bool SplitUserDefinedInUserText() const = 0;

  std::vector<std::string> token_bytes_;  // filled by the subclass, vocab_size() entries
  std::vector<std::string> token_text_;
  std::vector<TokenType> types_;

 private:
  absl::StatusOr<std::vector<int32_t>> EncodeImpl(std::string_view text, bool add_bos,
                                                  bool parse_control) const;

  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  std::vector<int32_t> eog_ids_;
  // Control and user-defined tokens, longest text first (llama.cpp's partition order).
  std::vector<int32_t> specials_by_length_;
  absl::flat_hash_map<std::string, int32_t> special_by_text_;
};

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_TOKENIZER_H_
