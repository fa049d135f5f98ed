#include "server/request_validation.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/tokenizer/utf8.h"
#include "scheduler/worker/worker.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

absl::Status Bad(std::string_view param, std::string message) {
  return WithParam(absl::InvalidArgumentError(std::move(message)), param);
}

int64_t PromptBytes(const PromptInput& p) {
  int64_t n = static_cast<int64_t>(p.text.size());
  for (const ChatMessage& m : p.chat) n += m.role.size() + m.content.size();
  return n;
}

absl::StatusOr<std::vector<int32_t>> Tokenize(const PromptInput& p, const ServingModel& model) {
  switch (p.kind) {
    case PromptInput::Kind::kText:
      if (p.text.empty()) return Bad(p.field, absl::StrCat(p.field, " is empty"));
      if (!utf8::IsValid(p.text)) return Bad(p.field, absl::StrCat(p.field, " is not UTF-8"));
      return model.tokenizer->Encode(p.text, model.vocab.add_bos);
    case PromptInput::Kind::kChat: {
      if (!model.chat.has_value()) {
        return Bad(p.field, absl::StrFormat("%s: the model '%s' has no chat template", p.field,
                                            model.name));
      }
      if (p.chat.empty()) return Bad(p.field, absl::StrCat(p.field, " is empty"));
      absl::StatusOr<std::vector<int32_t>> ids =
          model.chat->Render(p.chat, /*add_generation_prompt=*/true);
      if (!ids.ok() && ids.status().code() == absl::StatusCode::kInvalidArgument) {
        return Bad(p.field, absl::StrCat(p.field, ": ", ids.status().message()));
      }
      return ids;
    }
    case PromptInput::Kind::kTokenIds: {
      if (p.token_ids.empty()) return Bad(p.field, absl::StrCat(p.field, " is empty"));
      const int64_t vocab = model.tokenizer->vocab_size();
      std::vector<int32_t> ids;
      ids.reserve(p.token_ids.size());
      for (int64_t t : p.token_ids) {
        if (t < 0 || t >= vocab) {
          return Bad(p.field, absl::StrFormat("%s: token id %d is outside the vocabulary "
                                              "[0, %d)",
                                              p.field, t, vocab));
        }
        ids.push_back(static_cast<int32_t>(t));
      }
      return ids;
    }
    case PromptInput::Kind::kNone:
      break;
  }
  return Bad(p.field, "a prompt is required: exactly one of text, chat or token ids");
}

// The field named by SamplingOptions::Validate ("sampling option top_p = ...").
std::string SamplingParam(absl::string_view message) {
  constexpr absl::string_view kPrefix = "sampling option ";
  if (!absl::StartsWith(message, kPrefix)) return "sampling";
  message.remove_prefix(kPrefix.size());
  return std::string(message.substr(0, message.find(' ')));
}

absl::Status CheckStops(const std::vector<std::string>& stop, const RequestLimits& limits) {
  if (static_cast<int64_t>(stop.size()) > limits.max_stop_strings) {
    return Bad("stop", absl::StrFormat("stop: %d strings given, at most %d allowed",
                                       stop.size(), limits.max_stop_strings));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) return Bad("stop", absl::StrFormat("stop[%d] is empty", i));
    if (static_cast<int64_t>(stop[i].size()) > limits.max_stop_string_bytes) {
      return Bad("stop", absl::StrFormat("stop[%d] is %d bytes, at most %d allowed", i,
                                         stop[i].size(), limits.max_stop_string_bytes));
    }
    if (!utf8::IsValid(stop[i])) {
      return Bad("stop", absl::StrFormat("stop[%d] is not valid UTF-8", i));
    }
  }
  return absl::OkStatus();
}

// max_tokens as asked, or the default capped to what fits after the prompt.
absl::StatusOr<int> MaxTokens(const InferenceRequest& r, int prompt_tokens,
                              const RequestLimits& limits) {
  const int64_t room = static_cast<int64_t>(limits.max_context) - prompt_tokens;
  const int64_t cap = limits.max_new_tokens > 0 ? limits.max_new_tokens : limits.max_context;
  if (!r.max_tokens) {
    const int64_t d = std::min<int64_t>({limits.default_max_tokens, room, cap});
    if (d < 1) {
      return Bad(r.prompt.field,
                 absl::StrFormat("prompt (%d tokens) leaves no room in the maximum context of "
                                 "%d tokens",
                                 prompt_tokens, limits.max_context));
    }
    return static_cast<int>(d);
  }
  const int64_t m = *r.max_tokens;
  if (m < 1) return Bad("max_tokens", absl::StrFormat("max_tokens = %d must be >= 1", m));
  if (m > cap) {
    return Bad("max_tokens",
               absl::StrFormat("max_tokens = %d exceeds this server's limit of %d", m, cap));
  }
  if (m > room) {
    return Bad("max_tokens", absl::StrFormat("prompt (%d tokens) + max_tokens (%d) = %d "
                                             "exceeds the maximum context of %d tokens",
                                             prompt_tokens, m, prompt_tokens + m,
                                             limits.max_context));
  }
  return static_cast<int>(m);
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> RenderPrompt(const PromptInput& prompt,
                                                  const ServingModel& model,
                                                  const RequestLimits& limits) {
  if (PromptBytes(prompt) > limits.max_prompt_bytes) {
    return Bad(prompt.field, absl::StrFormat("%s is %d bytes, at most %d allowed", prompt.field,
                                             PromptBytes(prompt), limits.max_prompt_bytes));
  }
  absl::StatusOr<std::vector<int32_t>> ids = Tokenize(prompt, model);
  if (!ids.ok()) return ids;
  const int64_t max_tokens =
      limits.max_prompt_tokens > 0 ? limits.max_prompt_tokens : limits.max_context;
  if (max_tokens > 0 && static_cast<int64_t>(ids->size()) > max_tokens) {
    return Bad(prompt.field, absl::StrFormat("%s is %d tokens, at most %d allowed",
                                             prompt.field, ids->size(), max_tokens));
  }
  return ids;
}

absl::StatusOr<FrontendRequest> ValidateRequest(const InferenceRequest& r,
                                                const ServingModel& model,
                                                const RequestLimits& limits) {
  FrontendRequest out;
  out.adapter_id = r.adapter_id;
  absl::StatusOr<std::vector<int32_t>> prompt = RenderPrompt(r.prompt, model, limits);
  if (!prompt.ok()) return prompt.status();
  out.prompt = *std::move(prompt);
  if (absl::Status s = r.sampling.Validate(); !s.ok()) {
    const std::string param = SamplingParam(std::string(s.message()));
    return WithParam(std::move(s), param);
  }
  out.sampling = r.sampling;
  if (absl::Status s = CheckStops(r.stop, limits); !s.ok()) return s;
  out.stop_strings = r.stop;
  absl::StatusOr<int> max_tokens = MaxTokens(r, static_cast<int>(out.prompt.size()), limits);
  if (!max_tokens.ok()) return max_tokens.status();
  out.max_tokens = *max_tokens;
  out.stop_at_end_of_generation = !r.ignore_eos;
  const int max_top = std::min(limits.max_top_logprobs, kMaxTopLogprobs);
  if (r.top_logprobs < 0 || r.top_logprobs > max_top) {
    return Bad("top_logprobs", absl::StrFormat("top_logprobs = %d must be in [0, %d]",
                                               r.top_logprobs, max_top));
  }
  out.top_logprobs = static_cast<int>(r.top_logprobs);
  out.logprobs = r.logprobs || r.top_logprobs > 0;
  if (r.n < 1 || r.n > limits.max_n) {
    return Bad("n", absl::StrFormat("n = %d must be in [1, %d]", r.n, limits.max_n));
  }
  return out;
}

}  // namespace loom
