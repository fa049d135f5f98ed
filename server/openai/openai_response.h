// The OpenAI API's response objects, built from the text layer's StreamEvents:
// chat.completion / text_completion (whole), chat.completion.chunk / text_completion
// chunks (streamed as server-sent events), usage, logprobs in the chat shape
// ({"content": [{token, logprob, bytes, top_logprobs}]}) and the legacy completions shape
// ({tokens, token_logprobs, top_logprobs, text_offset}), the model list (vLLM's:
// adapters with parent = the base model), and errors
// ({"error": {"message", "type", "param", "code"}} with the HTTP status of the code).
#ifndef LOOM_SERVER_OPENAI_OPENAI_RESPONSE_H_
#define LOOM_SERVER_OPENAI_OPENAI_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "models/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "scheduler/frontend/frontend.h"
#include "server/model_catalog.h"
#include "server/openai/openai_request.h"

namespace loom {

// What every object of one response shares. `tokenizer` must outlive it.
struct ResponseContext {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string id;           // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;      // Unix seconds
  std::string model;        // as the request named it
  const Tokenizer* tokenizer = nullptr;
  bool logprobs = false;
  int top_logprobs = 0;
  bool include_usage = false;
};

// A context with a fresh random id for `request`.
ResponseContext MakeResponseContext(const OpenAiRequest& request, const Tokenizer* tokenizer);

// One choice's whole result (non-streaming), accumulated from its events.
struct ChoiceResult {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<TopLogprobs> top_logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  int completion_tokens = 0;
  void Add(const StreamEvent& event);
};

// The whole response: choices in order, usage = the prompt once + every choice's tokens.
nlohmann::json WholeResponse(const ResponseContext& ctx, const std::vector<ChoiceResult>& choices,
                             int prompt_tokens);

// Streamed objects. RoleChunk: the chat stream's first chunk of a choice (role only).
// EventChunk: the text and logprobs of one event; `text_offset`: bytes of the choice's
// text before it (legacy logprobs). FinishChunk: the finish reason. UsageChunk: the
// include_usage chunk (no choices).
nlohmann::json RoleChunk(const ResponseContext& ctx, int index);
nlohmann::json EventChunk(const ResponseContext& ctx, int index, const StreamEvent& event,
                          int64_t text_offset);
nlohmann::json FinishChunk(const ResponseContext& ctx, int index, FinishReason reason);
nlohmann::json UsageChunk(const ResponseContext& ctx, int prompt_tokens, int completion_tokens);

// "data: <json>\n\n"; and the stream's end, "data: [DONE]\n\n".
std::string SseFrame(const nlohmann::json& object);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// GET /v1/models.
nlohmann::json ModelList(const std::vector<ModelCard>& cards, int64_t created);

// The HTTP status for a refusal: InvalidArgument / FailedPrecondition 400,
// Unauthenticated 401, PermissionDenied 403, NotFound 404, ResourceExhausted 429,
// Unavailable 503, DeadlineExceeded 504, Unimplemented 501, else 500.
int HttpStatusOf(const absl::Status& status);
// {"error": {...}}: the message bounded and sanitised (status_mapping.h), type and code
// from the status (NotFound: code "model_not_found", param "model"), param from the
// status's payload.
nlohmann::json ErrorBody(const absl::Status& status);

// `j` as text; invalid UTF-8 (which no object here should hold) is replaced, never thrown.
std::string Dump(const nlohmann::json& j);

}  // namespace loom

#endif  // LOOM_SERVER_OPENAI_OPENAI_RESPONSE_H_
