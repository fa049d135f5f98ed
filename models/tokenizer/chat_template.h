// ChatML prompt rendering straight to token ids:
//   [<|im_start|>system\n{default system}<|im_end|>\n]   (when the first message is not
//                                                          a system message and the model
//                                                          has a default system line)
//   for each message: <|im_start|>{role}\n{content}<|im_end|>\n
//   [<|im_start|>assistant\n]                             (add_generation_prompt)
// The markers are the control-token ids; everything between them (role, content and the
// newlines) is encoded as untrusted text, so "<|im_start|>" inside a message stays plain
// text. The ids equal llama.cpp tokenizing the rendered string with parse_special=true
// whenever no message contains a control token's text.
#ifndef LOOM_MODELS_TOKENIZER_CHAT_TEMPLATE_H_
#define LOOM_MODELS_TOKENIZER_CHAT_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/tokenizer/tokenizer.h"
#include "models/tokenizer/vocabulary.h"

namespace loom {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

class ChatTemplate {
 public:
  // ChatML for `tokenizer`'s vocabulary: FailedPrecondition when <|im_start|> or
  // <|im_end|> is not a control token. The default system line is taken from
  // vocab.chat_template when that template inserts one for conversations that do not
  // start with a system message (SmolLM2: "You are a helpful AI assistant named SmolLM,
  // trained by Hugging Face"); otherwise there is none. `tokenizer` must outlive this.
  static absl::StatusOr<ChatTemplate> ChatML(const Tokenizer& tokenizer,
                                            const Vocabulary& vocab);

  // Renders `messages` to ids. InvalidArgument for an empty conversation or an unknown
  // role. Never adds BOS (ChatML models set add_bos_token=false; callers may prepend it).
  absl::StatusOr<std::vector<int32_t>> Render(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt) const;

  // The same prompt as text (for logs and for checking against the Jinja template).
  absl::StatusOr<std::string> RenderText(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt) const;

  const std::optional<std::string>& default_system() const { return default_system_; }
  // A copy that renders no implicit system line (llama.cpp's built-in "chatml" template
  // behaves so; the GGUF's Jinja template adds the default line).
  ChatTemplate WithoutDefaultSystem() const {
    return ChatTemplate(*tokenizer_, im_start_, im_end_, std::nullopt);
  }
  int32_t im_start_id() const { return im_start_; }
  int32_t im_end_id() const { return im_end_; }

 private:
  ChatTemplate(const Tokenizer& t, int32_t im_start, int32_t im_end,
               std::optional<std::string> default_system)
      : tokenizer_(&t), im_start_(im_start), im_end_(im_end),
        default_system_(std::move(default_system)) {}

  // The messages actually rendered (default system line prepended when it applies).
  absl::StatusOr<std::vector<ChatMessage>> Expand(
      const std::vector<ChatMessage>& messages) const;

  const Tokenizer* tokenizer_;
  int32_t im_start_;
  int32_t im_end_;
  std::optional<std::string> default_system_;
};

}  // namespace loom

#endif  // LOOM_MODELS_TOKENIZER_CHAT_TEMPLATE_H_
