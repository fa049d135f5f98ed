// The bodies of POST /v1/completions and /v1/chat/completions (OpenAI's shapes, plus the
// extensions vLLM and llama-server accept: top_k, min_p, repetition_penalty, ignore_eos)
// as the edge's InferenceRequest. Only the JSON shape is checked here (types, which
// fields exist); values are the edge's one validation (server/request_validation.h).
// A refusal is InvalidArgument naming the field (param payload, status_mapping.h).
// Pure functions of the body: no daemon state (fuzzable).
#ifndef LOOM_SERVER_OPENAI_OPENAI_REQUEST_H_
#define LOOM_SERVER_OPENAI_OPENAI_REQUEST_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/request_validation.h"

namespace loom {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string model;               // as sent; echoed in responses
  InferenceRequest request;        // adapter_id = model unless it names the base model
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage
  int legacy_logprobs = -1;        // completions: the integer `logprobs` (-1 = not asked)
};

// `base_model` is the id the base model is served under (a request naming it uses no
// adapter). The body must be a JSON object (its size is bounded by the HTTP server
// before this is called; nesting is bounded here).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(std::string_view body, OpenAiEndpoint endpoint,
                                                 const std::string& base_model);

}  // namespace loom

#endif  // LOOM_SERVER_OPENAI_OPENAI_REQUEST_H_
