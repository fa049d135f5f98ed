// Small UTF-8 helpers shared by the tokenizers and the incremental detokenizer.
#ifndef LOOM_MODELS_TOKENIZER_UTF8_H_
#define LOOM_MODELS_TOKENIZER_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::utf8 {

// U+FFFD encoded as UTF-8.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Result of looking at the bytes at the start of `s`.
enum class Scan {
  kValid,       // a complete, well-formed character of `length` bytes
  kIncomplete,  // a well-formed prefix of a character that `s` ends inside
  kInvalid,     // ill-formed: `length` bytes (>= 1) form one maximal invalid subpart
};

// Classifies the character starting at s[0] (s must be non-empty). Well-formed means
// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF. On kValid,
// *codepoint receives the scalar value (if non-null).
Scan ScanChar(std::string_view s, size_t* length, uint32_t* codepoint = nullptr);

// Appends the UTF-8 encoding of `cp` (must be a Unicode scalar value) to `out`.
void AppendCodepoint(uint32_t cp, std::string* out);

// `s` with every maximal invalid subpart (and a truncated tail) replaced by U+FFFD.
std::string Sanitize(std::string_view s);

// True if `s` is entirely well-formed UTF-8.
bool IsValid(std::string_view s);

}  // namespace loom::utf8

#endif  // LOOM_MODELS_TOKENIZER_UTF8_H_
