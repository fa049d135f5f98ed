#include "models/tokenizer/utf8.h"

namespace loom::utf8 {

Scan ScanChar(std::string_view s, size_t* length, uint32_t* codepoint) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = b(0);
  if (lead < 0x80) {
    *length = 1;
    if (codepoint != nullptr) *codepoint = lead;
    return Scan::kValid;
  }
  size_t need;
  uint32_t cp;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode table 3-7)
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2; cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3; cp = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4; cp = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    *length = 1;
    return Scan::kInvalid;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) {
      *length = i;
      return Scan::kIncomplete;
    }
    const uint8_t c = b(i);
    const bool ok = (i == 1) ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      *length = i;
      return Scan::kInvalid;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  *length = need;
  if (codepoint != nullptr) *codepoint = cp;
  return Scan::kValid;
}

void AppendCodepoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    const Scan r = ScanChar(s.substr(pos), &len);
    if (r == Scan::kValid) {
      out.append(s.data() + pos, len);
    } else {
      out.append(kReplacement);
    }
    pos += len;
  }
  return out;
}

bool IsValid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    if (ScanChar(s.substr(pos), &len) != Scan::kValid) return false;
    pos += len;
  }
  return true;
}

}  // namespace loom::utf8
