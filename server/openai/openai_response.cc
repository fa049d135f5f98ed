#include "server/openai/openai_response.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "models/tokenizer/utf8.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

using nlohmann::json;

bool IsChat(const ResponseContext& ctx) {
  return ctx.endpoint == OpenAiEndpoint::kChatCompletions;
}

std::string FinishName(FinishReason r) { return std::string(FinishReasonName(r)); }

json FinishJson(FinishReason r) {
  return r == FinishReason::kNone ? json(nullptr) : json(FinishName(r));
}

// A token's bytes, and as text (invalid UTF-8 of a partial character replaced).
std::string TokenRaw(const ResponseContext& ctx, int32_t id) {
  absl::StatusOr<std::string_view> b = ctx.tokenizer->TokenBytes(id);
  return b.ok() ? std::string(*b) : std::string();
}

json TokenEntry(const ResponseContext& ctx, int32_t id, float logprob) {
  const std::string raw = TokenRaw(ctx, id);
  json bytes = json::array();
  for (unsigned char c : raw) bytes.push_back(static_cast<int>(c));
  return json{{"token", utf8::Sanitize(raw)}, {"logprob", logprob}, {"bytes", bytes}};
}

// Chat shape: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
json ChatLogprobs(const ResponseContext& ctx, const std::vector<int32_t>& tokens,
                  const std::vector<float>& logprobs, const std::vector<TopLogprobs>& top) {
  json content = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    json e = TokenEntry(ctx, tokens[i], i < logprobs.size() ? logprobs[i] : 0.0f);
    json alts = json::array();
    if (i < top.size()) {
      for (int k = 0; k < ctx.top_logprobs && k < static_cast<int>(top[i].size()); ++k) {
        alts.push_back(TokenEntry(ctx, top[i][k].first, top[i][k].second));
      }
    }
    e["top_logprobs"] = std::move(alts);
    content.push_back(std::move(e));
  }
  return json{{"content", std::move(content)}};
}

// Legacy completions shape: parallel arrays, alternatives as {token: logprob} objects.
json LegacyLogprobs(const ResponseContext& ctx, const std::vector<int32_t>& tokens,
                    const std::vector<float>& logprobs, const std::vector<TopLogprobs>& top,
                    int64_t text_offset) {
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()},
              {"top_logprobs", json::array()}, {"text_offset", json::array()}};
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string raw = TokenRaw(ctx, tokens[i]);
    out["tokens"].push_back(utf8::Sanitize(raw));
    out["token_logprobs"].push_back(i < logprobs.size() ? logprobs[i] : 0.0f);
    json alts = json::object();
    if (i < top.size()) {
      for (int k = 0; k < ctx.top_logprobs && k < static_cast<int>(top[i].size()); ++k) {
        alts[utf8::Sanitize(TokenRaw(ctx, top[i][k].first))] = top[i][k].second;
      }
    }
    out["top_logprobs"].push_back(std::move(alts));
    out["text_offset"].push_back(text_offset);
    text_offset += static_cast<int64_t>(raw.size());
  }
  return out;
}

json LogprobsOf(const ResponseContext& ctx, const std::vector<int32_t>& tokens,
                const std::vector<float>& logprobs, const std::vector<TopLogprobs>& top,
                int64_t text_offset) {
  if (!ctx.logprobs) return nullptr;
  return IsChat(ctx) ? ChatLogprobs(ctx, tokens, logprobs, top)
                     : LegacyLogprobs(ctx, tokens, logprobs, top, text_offset);
}

json Envelope(const ResponseContext& ctx, bool chunk) {
  const char* object = IsChat(ctx) ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                   : "text_completion";
  json j = {{"id", ctx.id}, {"object", object}, {"created", ctx.created}, {"model", ctx.model},
            {"system_fingerprint", nullptr}};
  if (chunk && ctx.include_usage) j["usage"] = nullptr;
  return j;
}

json Usage(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

// One streamed choice: chat {"delta": ...}, completions {"text": ...}.
json StreamChoice(const ResponseContext& ctx, int index, json delta, const std::string& text,
                  json logprobs, FinishReason reason) {
  json c = {{"index", index}, {"logprobs", std::move(logprobs)}, {"finish_reason",
                                                                  FinishJson(reason)}};
  if (IsChat(ctx)) {
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
  return c;
}

}  // namespace

ResponseContext MakeResponseContext(const OpenAiRequest& request, const Tokenizer* tokenizer) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  ResponseContext ctx;
  ctx.endpoint = request.endpoint;
  ctx.id = absl::StrFormat("%s-%016x%08x",
                           request.endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl"
                                                                                : "cmpl",
                           rng(), static_cast<uint32_t>(rng()));
  ctx.created = absl::ToUnixSeconds(absl::Now());
  ctx.model = request.model;
  ctx.tokenizer = tokenizer;
  ctx.logprobs = request.request.logprobs || request.request.top_logprobs > 0;
  ctx.top_logprobs = static_cast<int>(request.request.top_logprobs);
  ctx.include_usage = request.include_usage;
  return ctx;
}

void ChoiceResult::Add(const StreamEvent& e) {
  text += e.text;
  tokens.insert(tokens.end(), e.token_ids.begin(), e.token_ids.end());
  logprobs.insert(logprobs.end(), e.token_logprobs.begin(), e.token_logprobs.end());
  top_logprobs.insert(top_logprobs.end(), e.top_logprobs.begin(), e.top_logprobs.end());
  if (e.finished) finish_reason = e.finish_reason;
  completion_tokens = e.completion_tokens;
}

json WholeResponse(const ResponseContext& ctx, const std::vector<ChoiceResult>& choices,
                   int prompt_tokens) {
  json out = Envelope(ctx, /*chunk=*/false);
  json list = json::array();
  int completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& r = choices[i];
    completion += r.completion_tokens;
    json c = {{"index", i},
              {"logprobs", LogprobsOf(ctx, r.tokens, r.logprobs, r.top_logprobs, 0)},
              {"finish_reason", FinishJson(r.finish_reason)}};
    if (IsChat(ctx)) {
      c["message"] = {{"role", "assistant"}, {"content", r.text}, {"refusal", nullptr}};
    } else {
      c["text"] = r.text;
    }
    list.push_back(std::move(c));
  }
  out["choices"] = std::move(list);
  out["usage"] = Usage(prompt_tokens, completion);
  return out;
}

json RoleChunk(const ResponseContext& ctx, int index) {
  json out = Envelope(ctx, /*chunk=*/true);
  out["choices"] = json::array({StreamChoice(ctx, index, {{"role", "assistant"}, {"content", ""}},
                                             "", nullptr, FinishReason::kNone)});
  return out;
}

json EventChunk(const ResponseContext& ctx, int index, const StreamEvent& e,
                int64_t text_offset) {
  json out = Envelope(ctx, /*chunk=*/true);
  out["choices"] = json::array(
      {StreamChoice(ctx, index, {{"content", e.text}}, e.text,
                    LogprobsOf(ctx, e.token_ids, e.token_logprobs, e.top_logprobs, text_offset),
                    FinishReason::kNone)});
  return out;
}

json FinishChunk(const ResponseContext& ctx, int index, FinishReason reason) {
  json out = Envelope(ctx, /*chunk=*/true);
  out["choices"] =
      json::array({StreamChoice(ctx, index, json::object(), "", nullptr, reason)});
  return out;
}

json UsageChunk(const ResponseContext& ctx, int prompt_tokens, int completion_tokens) {
  json out = Envelope(ctx, /*chunk=*/true);
  out["choices"] = json::array();
  out["usage"] = Usage(prompt_tokens, completion_tokens);
  return out;
}

std::string SseFrame(const json& object) { return absl::StrCat("data: ", Dump(object), "\n\n"); }

json ModelList(const std::vector<ModelCard>& cards, int64_t created) {
  json data = json::array();
  for (const ModelCard& c : cards) {
    data.push_back({{"id", c.id},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "loom"},
                    {"root", c.id},
                    {"parent", c.parent.empty() ? json(nullptr) : json(c.parent)},
                    {"max_model_len", c.max_context}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

int HttpStatusOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

json ErrorBody(const absl::Status& s) {
  std::string type = "server_error";
  json code = nullptr;
  std::string param = ErrorParam(s);
  switch (HttpStatusOf(s)) {
    case 400:
    case 409:
      type = "invalid_request_error";
      break;
    case 401:
      type = "authentication_error";
      code = "invalid_api_key";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
      type = "invalid_request_error";
      code = "model_not_found";
      if (param.empty()) param = "model";
      break;
    case 429:
      type = "rate_limit_error";
      code = "rate_limit_exceeded";
      break;
    default:
      break;
  }
  return {{"error",
           {{"message", SanitizeClientMessage(std::string(s.message()))},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code}}}};
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace loom
