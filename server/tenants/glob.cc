#include "server/tenants/glob.h"

#include <vector>

namespace loom {
namespace {

// The first position >= from where `needle` (non-empty) occurs in `text`, or npos.
// Knuth-Morris-Pratt: O(|needle| + |text| - from).
size_t FindFrom(std::string_view text, std::string_view needle, size_t from) {
  std::vector<size_t> fail(needle.size(), 0);
  for (size_t i = 1, k = 0; i < needle.size(); ++i) {
    while (k > 0 && needle[i] != needle[k]) k = fail[k - 1];
    if (needle[i] == needle[k]) ++k;
    fail[i] = k;
  }
  for (size_t i = from, k = 0; i < text.size(); ++i) {
    while (k > 0 && text[i] != needle[k]) k = fail[k - 1];
    if (text[i] == needle[k]) ++k;
    if (k == needle.size()) return i + 1 - k;
  }
  return std::string_view::npos;
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view text) {
  const size_t first_star = pattern.find('*');
  if (first_star == std::string_view::npos) return pattern == text;
  const size_t last_star = pattern.rfind('*');
  const std::string_view head = pattern.substr(0, first_star);
  const std::string_view tail = pattern.substr(last_star + 1);
  if (head.size() + tail.size() > text.size()) return false;
  if (text.substr(0, head.size()) != head) return false;
  if (text.substr(text.size() - tail.size()) != tail) return false;
  // Middle pieces, leftmost each, inside text[head, size - tail).
  const std::string_view middle_text = text.substr(0, text.size() - tail.size());
  size_t at = head.size();
  size_t p = first_star + 1;
  while (p <= last_star) {
    const size_t star = pattern.find('*', p);
    const std::string_view piece = pattern.substr(p, star - p);
    p = star + 1;
    if (piece.empty()) continue;
    const size_t found = FindFrom(middle_text, piece, at);
    if (found == std::string_view::npos) return false;
    at = found + piece.size();
  }
  return true;
}

}  // namespace loom
