#include "models/tokenizer/incremental_detokenizer.h"

#include "models/tokenizer/utf8.h"

namespace loom {

absl::StatusOr<std::string> IncrementalDetokenizer::Push(int32_t id) {
  auto bytes = tokenizer_.TokenBytes(id);
  if (!bytes.ok()) return bytes.status();
  if (tokenizer_.IsControl(id) && !options_.render_control) return std::string();
  std::string_view b = *bytes;
  if (at_start_ && !b.empty()) {
    at_start_ = false;
    if (options_.strip_dummy_prefix && tokenizer_.adds_dummy_prefix() && b[0] == ' ') {
      b.remove_prefix(1);
    }
  }
  pending_.append(b.data(), b.size());

  // Emit every complete character; replace ill-formed subparts; keep a trailing
  // well-formed-but-incomplete prefix.
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    size_t len = 1;
    const utf8::Scan r = utf8::ScanChar(std::string_view(pending_).substr(pos), &len);
    if (r == utf8::Scan::kIncomplete) break;
    if (r == utf8::Scan::kValid) {
      out.append(pending_, pos, len);
    } else {
      out.append(utf8::kReplacement);
    }
    pos += len;
  }
  pending_.erase(0, pos);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = pending_.empty() ? std::string() : std::string(utf8::kReplacement);
  pending_.clear();
  at_start_ = true;
  return out;
}

}  // namespace loom
