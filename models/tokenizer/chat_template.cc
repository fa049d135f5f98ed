#include "models/tokenizer/chat_template.h"

#include "absl/strings/str_cat.h"

namespace loom {
namespace {

constexpr char kImStart[] = "<|im_start|>";
constexpr char kImEnd[] = "<|im_end|>";

// The system text a ChatML Jinja template inserts when messages[0] is not a system
// message: the text between "<|im_start|>system\n" and the next "<|im_end|>", provided
// the template tests for a missing system message at all.
std::optional<std::string> DefaultSystemFromJinja(std::string_view jinja) {
  if (jinja.find("!= 'system'") == std::string_view::npos &&
      jinja.find("!= \"system\"") == std::string_view::npos) {
    return std::nullopt;
  }
  // The Jinja source stores the newline either raw or as the escape "\n".
  for (std::string_view marker : {std::string_view("<|im_start|>system\\n"),
                                  std::string_view("<|im_start|>system\n")}) {
    const size_t begin = jinja.find(marker);
    if (begin == std::string_view::npos) continue;
    const size_t text = begin + marker.size();
    const size_t end = jinja.find(kImEnd, text);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view s = jinja.substr(text, end - text);
    // A literal system line only: not a Jinja expression such as {{ messages[0]... }}.
    if (s.find("{{") != std::string_view::npos || s.find("'") != std::string_view::npos) {
      return std::nullopt;
    }
    return std::string(s);
  }
  return std::nullopt;
}

bool KnownRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::ChatML(const Tokenizer& tokenizer,
                                                 const Vocabulary& vocab) {
  const std::optional<int32_t> start = tokenizer.SpecialTokenId(kImStart);
  const std::optional<int32_t> end = tokenizer.SpecialTokenId(kImEnd);
  if (!start || !end || !tokenizer.IsControl(*start) || !tokenizer.IsControl(*end)) {
    return absl::FailedPreconditionError(
        "vocabulary has no <|im_start|>/<|im_end|> control tokens: not a ChatML model");
  }
  return ChatTemplate(tokenizer, *start, *end, DefaultSystemFromJinja(vocab.chat_template));
}

absl::StatusOr<std::vector<ChatMessage>> ChatTemplate::Expand(
    const std::vector<ChatMessage>& messages) const {
  if (messages.empty()) return absl::InvalidArgumentError("conversation has no messages");
  std::vector<ChatMessage> out;
  out.reserve(messages.size() + 1);
  if (default_system_.has_value() && messages[0].role != "system") {
    out.push_back({"system", *default_system_});
  }
  for (const ChatMessage& m : messages) {
    if (!KnownRole(m.role)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown chat role \"", m.role, "\""));
    }
    out.push_back(m);
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> ChatTemplate::Render(
    const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  auto expanded = Expand(messages);
  if (!expanded.ok()) return expanded.status();
  std::vector<int32_t> ids;
  auto append_text = [&](std::string_view text) -> absl::Status {
    auto t = tokenizer_->Encode(text, /*add_bos=*/false);
    if (!t.ok()) return t.status();
    ids.insert(ids.end(), t->begin(), t->end());
    return absl::OkStatus();
  };
  for (const ChatMessage& m : *expanded) {
    ids.push_back(im_start_);
    if (auto s = append_text(absl::StrCat(m.role, "\n", m.content)); !s.ok()) return s;
    ids.push_back(im_end_);
    if (auto s = append_text("\n"); !s.ok()) return s;
  }
  if (add_generation_prompt) {
    ids.push_back(im_start_);
    if (auto s = append_text("assistant\n"); !s.ok()) return s;
  }
  return ids;
}

absl::StatusOr<std::string> ChatTemplate::RenderText(const std::vector<ChatMessage>& messages,
                                                     bool add_generation_prompt) const {
  auto expanded = Expand(messages);
  if (!expanded.ok()) return expanded.status();
  std::string out;
  for (const ChatMessage& m : *expanded) {
    absl::StrAppend(&out, kImStart, m.role, "\n", m.content, kImEnd, "\n");
  }
  if (add_generation_prompt) absl::StrAppend(&out, kImStart, "assistant\n");
  return out;
}

}  // namespace loom
