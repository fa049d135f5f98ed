// Regex pre-tokenizers for byte-level BPE, matching llama.cpp's `unicode_regex_split`:
// a sequence of regexes, each splitting every piece produced by the previous one; text
// between matches is kept as its own piece (nothing is ever dropped), so the pieces always
// concatenate back to the input.
#ifndef LOOM_MODELS_TOKENIZER_PRE_TOKENIZER_H_
#define LOOM_MODELS_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom {

class PreTokenizer {
 public:
  // `name` is Vocabulary::pre. Supported: "smollm" (and llama.cpp's aliases with the
  // same regexes: starcoder, refact, command-r, codeshell, exaone, minerva): split every
  // \p{N} character on its own, then the GPT-2 regex; "gpt2" (mpt, olmo, jais) and ""
  // / "default": the GPT-2 regex alone. Others: Unimplemented (never silently wrong ids).
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(std::string_view name);

  // Builds a pre-tokenizer from PCRE2 patterns (UTF + UCP mode), applied in order.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromPatterns(
      const std::vector<std::string>& patterns);

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits `text`, which must be well-formed UTF-8 (InvalidArgument otherwise), into
  // non-empty pieces that view `text` and concatenate back to it. Thread-safe.
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Compiled;
  PreTokenizer() = default;
  std::vector<Compiled*> regexes_;  // owned; freed in the destructor
};

// The GPT-2 pre-tokenizer regex with \s spelled out as llama.cpp's whitespace set
// (Unicode White_Space), so that PCRE2 and llama.cpp agree on every code point.
extern const char* const kGpt2Pattern;

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_PRE_TOKENIZER_H_
