// Regular expressions that an adapter's own files supply (PEFT target_modules and
// exclude_modules as a string, rank_pattern / alpha_pattern keys), compiled with RE2:
// matching is linear in the text and memory per pattern is capped, so no pattern can
// backtrack forever or recurse once per character the way std::regex does.
//
// Before RE2 sees a pattern it must be at most kMaxAdapterPatternBytes long and nest
// groups at most kMaxAdapterPatternNesting deep. Syntax is RE2's (Python's re minus
// backreferences and lookaround); what RE2 cannot express is refused, never approximated.
#ifndef LOOM_MODELS_LORA_ADAPTER_PATTERN_H_
#define LOOM_MODELS_LORA_ADAPTER_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "re2/re2.h"

namespace loom {

inline constexpr size_t kMaxAdapterPatternBytes = 1024;
inline constexpr int kMaxAdapterPatternNesting = 32;
// RE2's budget for one pattern's compiled program and match caches.
inline constexpr int64_t kAdapterPatternMemory = int64_t{64} << 10;

// The deepest group nesting of `pattern`: unescaped '(' open a level and ')' close one. A
// '(' inside a character class counts too, so this never under-estimates.
int PatternNestingDepth(absl::string_view pattern);

// `pattern` compiled for whole-string matching (RE2::FullMatch). FailedPrecondition
// "<file>: <field>: ..." naming the bound it breaks or RE2's reason (the pattern itself is
// echoed bounded and escaped).
absl::StatusOr<std::unique_ptr<const re2::RE2>> CompileAdapterPattern(
    const std::string& file, const std::string& field, absl::string_view pattern);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_ADAPTER_PATTERN_H_
