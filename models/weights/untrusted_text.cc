#include "models/weights/untrusted_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace loom {

std::string QuoteUntrusted(absl::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  std::string out = absl::StrCat("'", absl::CHexEscape(text.substr(0, max_bytes)));
  if (cut) return absl::StrCat(out, "...' (", text.size(), " bytes)");
  return absl::StrCat(out, "'");
}

}  // namespace loom
