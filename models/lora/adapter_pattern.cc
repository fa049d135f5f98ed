#include "models/lora/adapter_pattern.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "models/weights/untrusted_text.h"

namespace loom {

int PatternNestingDepth(absl::string_view pattern) {
  int depth = 0, deepest = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;  // the escaped character is a literal
    } else if (c == '(') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ')' && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<std::unique_ptr<const re2::RE2>> CompileAdapterPattern(
    const std::string& file, const std::string& field, absl::string_view pattern) {
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: %s: regular expression %s %s", file, field, QuoteUntrusted(pattern), why));
  };
  if (pattern.size() > kMaxAdapterPatternBytes) {
    return refuse(absl::StrFormat("is longer than %d bytes", kMaxAdapterPatternBytes));
  }
  if (const int depth = PatternNestingDepth(pattern); depth > kMaxAdapterPatternNesting) {
    return refuse(absl::StrFormat("nests groups %d deep (at most %d)", depth,
                                  kMaxAdapterPatternNesting));
  }
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kAdapterPatternMemory);
  auto re = std::make_unique<const re2::RE2>(
      re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    if (re->error_code() == re2::RE2::ErrorPatternTooLarge) {
      return refuse("compiles to a program too large for the pattern memory budget");
    }
    return refuse(absl::StrFormat(
        "is not supported: %s (Loom matches with RE2: Python re syntax without "
        "backreferences or lookaround)",
        QuoteUntrusted(re->error())));
  }
  return re;
}

}  // namespace loom
