// Text that a file or a request controls, made safe to echo in a Status message or a log
// line: bounded in length and with every byte outside printable ASCII escaped, so a
// 60,000-character tensor name cannot grow an error past gRPC's metadata limit and a name
// holding control characters or invalid UTF-8 cannot forge log lines.
#ifndef LOOM_MODELS_WEIGHTS_UNTRUSTED_TEXT_H_
#define LOOM_MODELS_WEIGHTS_UNTRUSTED_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace loom {

// Longest prefix of an untrusted name that messages echo.
inline constexpr size_t kMaxEchoedBytes = 96;

// `text` in single quotes, C-escaped (\n, \x01, \\, \', ...), cut after `max_bytes` input
// bytes with "...' (N bytes)" appended when longer. The result is printable ASCII and at
// most about 4 * max_bytes + 32 characters long.
std::string QuoteUntrusted(absl::string_view text, size_t max_bytes = kMaxEchoedBytes);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_UNTRUSTED_TEXT_H_
