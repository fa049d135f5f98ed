#include "models/sampling/stop_checker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace loom {
namespace {

// True if `s` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      const unsigned char cc = static_cast<unsigned char>(s[i + j]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kNone:
      break;
  }
  return "";
}

absl::StatusOr<StopChecker> StopChecker::Create(std::vector<std::string> stop_strings,
                                                std::vector<int32_t> stop_ids,
                                                int max_tokens) {
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stop string ", i, " is empty"));
    }
    if (!IsValidUtf8(stop_strings[i])) {
      return absl::InvalidArgumentError(absl::StrCat("stop string ", i, " is not valid UTF-8"));
    }
  }
  if (max_tokens <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens = ", max_tokens, " is invalid: must be > 0"));
  }
  return StopChecker(std::move(stop_strings), std::move(stop_ids), max_tokens);
}

StopChecker::StopChecker(std::vector<std::string> stop_strings, std::vector<int32_t> stop_ids,
                         int max_tokens)
    : stop_strings_(std::move(stop_strings)),
      stop_ids_(std::move(stop_ids)),
      max_tokens_(max_tokens) {}

size_t StopChecker::HeldLength() const {
  size_t held = 0;
  for (const std::string& stop : stop_strings_) {
    // Longer candidates first; anything <= held cannot improve the answer.
    for (size_t k = std::min(stop.size() - 1, pending_.size()); k > held; --k) {
      if (pending_.compare(pending_.size() - k, k, stop, 0, k) == 0) {
        held = k;
        break;
      }
    }
  }
  return held;
}

StopChecker::Step StopChecker::Update(int32_t token, std::string_view new_text) {
  Step step;
  if (finished()) {
    step.finished = true;
    step.reason = reason_;
    return step;
  }
  ++generated_;
  if (std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end()) {
    reason_ = FinishReason::kStop;
    step.text = Flush();
    step.finished = true;
    step.reason = reason_;
    step.stop_token = token;
    return step;
  }
  pending_.append(new_text.data(), new_text.size());
  // Any match starts inside pending_: released text never begins a stop string.
  size_t first = std::string::npos;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const size_t pos = pending_.find(stop_strings_[i]);
    if (pos < first) {
      first = pos;
      step.stop_string_index = static_cast<int>(i);
    }
  }
  if (first != std::string::npos) {
    reason_ = FinishReason::kStop;
    step.text = pending_.substr(0, first);
    pending_.clear();
    step.finished = true;
    step.reason = reason_;
    return step;
  }
  const size_t release = pending_.size() - HeldLength();
  step.text = pending_.substr(0, release);
  pending_.erase(0, release);
  if (generated_ >= max_tokens_) {
    reason_ = FinishReason::kLength;
    step.text += Flush();
    step.finished = true;
    step.reason = reason_;
  }
  return step;
}

std::string StopChecker::Flush() {
  std::string text;
  text.swap(pending_);
  return text;
}

}  // namespace loom
