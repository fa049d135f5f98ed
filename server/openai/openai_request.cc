#include "server/openai/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/status_mapping.h"

namespace loom {
namespace {

using nlohmann::json;

constexpr int kMaxNesting = 32;

absl::Status Bad(std::string_view param, const std::string& message) {
  return WithParam(absl::InvalidArgumentError(message), param);
}

// Nesting depth of `text` read as JSON, counting brackets outside strings.
int Nesting(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// obj[key] when it is a string, else "" (nlohmann's value() throws on a type mismatch).
std::string StringField(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Typed readers: a field that is absent or null leaves `out` unchanged.
absl::Status ReadNumber(const json& body, const char* name, float* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Bad(name, absl::StrCat(name, " must be a number"));
  const double v = it->get<double>();
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) {
    return Bad(name, absl::StrCat(name, " is out of range"));
  }
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

template <typename Int>
absl::Status ReadInt(const json& body, const char* name, Int* out, bool* present = nullptr) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return Bad(name, absl::StrCat(name, " must be an integer"));
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{1} << 62) {
    return Bad(name, absl::StrCat(name, " is out of range"));
  }
  const int64_t v = it->get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
      (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<Int>::max()))) {
    return Bad(name, absl::StrCat(name, " is out of range"));
  }
  *out = static_cast<Int>(v);
  if (present != nullptr) *present = true;
  return absl::OkStatus();
}

absl::Status ReadBool(const json& body, const char* name, bool* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(name, absl::StrCat(name, " must be a boolean"));
  *out = it->get<bool>();
  return absl::OkStatus();
}

// Parameters OpenAI defines that Loom does not implement: refused rather than ignored,
// since ignoring them would change what the caller gets.
absl::Status RefuseUnsupported(const json& body) {
  for (const char* name : {"tools", "tool_choice", "functions", "function_call", "suffix",
                           "audio", "prediction", "modalities"}) {
    auto it = body.find(name);
    if (it != body.end() && !it->is_null()) {
      return Bad(name, absl::StrCat(name, " is not supported by this server"));
    }
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null() && !it->empty()) {
    return Bad("logit_bias", "logit_bias is not supported by this server");
  }
  if (auto it = body.find("echo"); it != body.end() && it->is_boolean() && it->get<bool>()) {
    return Bad("echo", "echo is not supported by this server");
  }
  if (auto it = body.find("best_of"); it != body.end() && it->is_number_integer() &&
                                      it->get<int64_t>() > 1) {
    return Bad("best_of", "best_of > 1 is not supported by this server");
  }
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || StringField(*it, "type") != "text") {
      return Bad("response_format", "only response_format {\"type\": \"text\"} is supported");
    }
  }
  return absl::OkStatus();
}

absl::Status ReadStop(const json& body, std::vector<std::string>* out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
    return absl::OkStatus();
  }
  if (!it->is_array()) return Bad("stop", "stop must be a string or an array of strings");
  for (const json& s : *it) {
    if (!s.is_string()) return Bad("stop", "stop must be a string or an array of strings");
    out->push_back(s.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(const json& body, InferenceRequest* r) {
  SamplingOptions& s = r->sampling;
  for (auto [name, field] : {std::pair{"temperature", &s.temperature}, {"top_p", &s.top_p},
                             {"min_p", &s.min_p}, {"frequency_penalty", &s.frequency_penalty},
                             {"presence_penalty", &s.presence_penalty},
                             {"repetition_penalty", &s.repetition_penalty}}) {
    if (absl::Status st = ReadNumber(body, name, field); !st.ok()) return st;
  }
  int64_t top_k = 0;
  if (absl::Status st = ReadInt(body, "top_k", &top_k); !st.ok()) return st;
  s.top_k = top_k == -1 ? 0 : static_cast<int>(std::clamp<int64_t>(top_k, -2, 1 << 30));
  bool seeded = false;
  int64_t seed = 0;
  if (absl::Status st = ReadInt(body, "seed", &seed, &seeded); !st.ok()) return st;
  if (seeded) {
    s.seed = static_cast<uint64_t>(seed);
    s.has_seed = true;
  }
  return absl::OkStatus();
}

// The completions `prompt`: a string, an array of one string, or token ids.
absl::Status ReadPrompt(const json& body, PromptInput* p) {
  p->field = "prompt";
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Bad("prompt", "prompt is required");
  const json* v = &*it;
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) v = &(*v)[0];
  if (v->is_string()) {
    p->kind = PromptInput::Kind::kText;
    p->text = v->get<std::string>();
    return absl::OkStatus();
  }
  if (v->is_array() && !v->empty() && (*v)[0].is_number_integer()) {
    p->kind = PromptInput::Kind::kTokenIds;
    for (const json& t : *v) {
      if (!t.is_number_integer()) return Bad("prompt", "prompt token ids must be integers");
      p->token_ids.push_back(t.is_number_unsigned() && t.get<uint64_t>() > (uint64_t{1} << 40)
                                 ? int64_t{1} << 40
                                 : t.get<int64_t>());
    }
    return absl::OkStatus();
  }
  return Bad("prompt", "prompt must be a string or an array of token ids (one prompt per "
                       "request)");
}

// The chat `messages`: {role, content} with content a string or text parts.
absl::Status ReadMessages(const json& body, PromptInput* p) {
  p->field = "messages";
  p->kind = PromptInput::Kind::kChat;
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array()) return Bad("messages", "messages must be an array");
  for (const json& m : *it) {
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string()) {
      return Bad("messages", "each message needs a string role");
    }
    ChatMessage msg{m.at("role").get<std::string>(), ""};
    static const json kNull;
    const json& content = m.contains("content") ? m.at("content") : kNull;
    if (content.is_string()) {
      msg.content = content.get<std::string>();
    } else if (content.is_array()) {
      for (const json& part : content) {
        if (!part.is_object() || StringField(part, "type") != "text" ||
            !part.contains("text") || !part.at("text").is_string()) {
          return Bad("messages", "only text content parts are supported");
        }
        msg.content += part.at("text").get<std::string>();
      }
    } else if (!content.is_null()) {
      return Bad("messages", "message content must be a string or an array of text parts");
    }
    p->chat.push_back(std::move(msg));
  }
  return absl::OkStatus();
}

// logprobs / top_logprobs in the endpoint's shape.
absl::Status ReadLogprobs(const json& body, OpenAiRequest* out) {
  InferenceRequest& r = out->request;
  if (out->endpoint == OpenAiEndpoint::kChatCompletions) {
    if (absl::Status s = ReadBool(body, "logprobs", &r.logprobs); !s.ok()) return s;
    bool has_top = false;
    if (absl::Status s = ReadInt(body, "top_logprobs", &r.top_logprobs, &has_top); !s.ok()) {
      return s;
    }
    if (has_top && r.top_logprobs > 0 && !r.logprobs) {
      return Bad("top_logprobs", "top_logprobs requires logprobs to be true");
    }
    return absl::OkStatus();
  }
  // Legacy completions: logprobs = k returns each token's log-probability and k
  // alternatives.
  bool present = false;
  int64_t k = 0;
  if (absl::Status s = ReadInt(body, "logprobs", &k, &present); !s.ok()) return s;
  if (!present) return absl::OkStatus();
  if (k < 0) return Bad("logprobs", "logprobs must be >= 0");
  out->legacy_logprobs = static_cast<int>(std::min<int64_t>(k, 1 << 20));
  r.logprobs = true;
  r.top_logprobs = k;
  return absl::OkStatus();
}

absl::Status ReadMaxTokens(const json& body, InferenceRequest* r) {
  for (const char* name : {"max_completion_tokens", "max_tokens"}) {
    bool present = false;
    int64_t v = 0;
    if (absl::Status s = ReadInt(body, name, &v, &present); !s.ok()) return s;
    if (present) {
      if (v < 1) return Bad(name, absl::StrCat(name, " = ", v, " must be >= 1"));
      r->max_tokens = v;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status ReadStreamOptions(const json& body, OpenAiRequest* out) {
  if (absl::Status s = ReadBool(body, "stream", &out->stream); !s.ok()) return s;
  auto it = body.find("stream_options");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Bad("stream_options", "stream_options must be an object");
  if (!out->stream) return Bad("stream_options", "stream_options requires stream to be true");
  return ReadBool(*it, "include_usage", &out->include_usage).ok()
             ? absl::OkStatus()
             : Bad("stream_options", "stream_options.include_usage must be a boolean");
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(std::string_view body,
                                                 OpenAiEndpoint endpoint,
                                                 const std::string& base_model) {
  if (Nesting(body) > kMaxNesting) {
    return Bad("", absl::StrCat("the request body is nested deeper than ", kMaxNesting));
  }
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Bad("", "the request body is not a JSON object");
  }
  OpenAiRequest out;
  out.endpoint = endpoint;
  out.model = StringField(doc, "model");
  if (out.model.empty()) {
    return Bad("model", "model is required: the base model's id or an adapter's");
  }
  InferenceRequest& r = out.request;
  r.adapter_id = out.model == base_model ? "" : out.model;
  absl::Status s = RefuseUnsupported(doc);
  if (s.ok()) {
    s = endpoint == OpenAiEndpoint::kChatCompletions ? ReadMessages(doc, &r.prompt)
                                                     : ReadPrompt(doc, &r.prompt);
  }
  if (s.ok()) s = ReadSampling(doc, &r);
  if (s.ok()) s = ReadStop(doc, &r.stop);
  if (s.ok()) s = ReadMaxTokens(doc, &r);
  if (s.ok()) s = ReadInt(doc, "n", &r.n);
  if (s.ok()) s = ReadBool(doc, "ignore_eos", &r.ignore_eos);
  if (s.ok()) s = ReadLogprobs(doc, &out);
  if (s.ok()) s = ReadStreamOptions(doc, &out);
  if (s.ok() && doc.contains("user") && !doc.at("user").is_null() &&
      !doc.at("user").is_string()) {
    s = Bad("user", "user must be a string");
  }
  if (!s.ok()) return s;
  return out;
}

}  // namespace loom
