// The one request validation of the edge. Every protocol (loom.v1.Inference over gRPC,
// the OpenAI HTTP API, in both the single and the router role) turns its wire form into
// an InferenceRequest and calls ValidateRequest, which checks every field against the
// RequestLimits, renders and tokenizes the prompt, and returns the FrontendRequest the
// core runs. A refusal is InvalidArgument naming the field and value, with the field's
// name also attached as a payload (ErrorParam in status_mapping.h) for the OpenAI
// error's "param". Below the edge nothing re-checks these fields; a worker checks only
// its own invariants (scheduler/worker/worker.h).
#ifndef LOOM_SERVER_REQUEST_VALIDATION_H_
#define LOOM_SERVER_REQUEST_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/sampling/sampling_options.h"
#include "models/tokenizer/chat_template.h"
#include "scheduler/frontend/frontend.h"
#include "server/request_limits.h"
#include "server/serving_model.h"

namespace loom {

// The prompt as a protocol carries it; exactly one form is set.
struct PromptInput {
  enum class Kind { kNone, kText, kChat, kTokenIds };
  Kind kind = Kind::kNone;
  std::string text;                  // kText: tokenized as is (BOS as the vocabulary says)
  std::vector<ChatMessage> chat;     // kChat: rendered with the model's chat template
  std::vector<int64_t> token_ids;    // kTokenIds: used as is
  // The protocol's name of the prompt field, for errors ("prompt", "messages", "text").
  std::string field = "prompt";
};

// A generation request before validation, in the vocabulary both protocols share.
struct InferenceRequest {
  std::string adapter_id;            // "" = the base model
  PromptInput prompt;
  SamplingOptions sampling;          // fields the request did not set keep the defaults
  std::vector<std::string> stop;
  std::optional<int64_t> max_tokens;  // unset = default_max_tokens
  bool ignore_eos = false;
  bool logprobs = false;
  int64_t top_logprobs = 0;
  int64_t n = 1;                     // OpenAI `n`; gRPC always 1
};

// The prompt's token ids. InvalidArgument (param = prompt.field) for no prompt, an empty
// or oversized one, a token id outside the vocabulary, a chat prompt on a model without
// a chat template, an unknown role, or more than max_prompt_tokens tokens.
absl::StatusOr<std::vector<int32_t>> RenderPrompt(const PromptInput& prompt,
                                                  const ServingModel& model,
                                                  const RequestLimits& limits);

// Every check above the workers; the request ready for a Frontend (deadline left
// infinite: the protocol sets it). Errors: InvalidArgument naming the field (param
// payload set), with prompt + max_tokens beyond the context naming both numbers.
absl::StatusOr<FrontendRequest> ValidateRequest(const InferenceRequest& request,
                                                const ServingModel& model,
                                                const RequestLimits& limits);

}  // namespace loom

#endif  // LOOM_SERVER_REQUEST_VALIDATION_H_
