// loom.v1.Inference's messages <-> the edge's types: a GenerateRequest becomes an
// InferenceRequest for ValidateRequest (no checks here), a StreamEvent becomes a
// GenerateResponse.
#ifndef LOOM_SERVER_GRPC_INFERENCE_MESSAGES_H_
#define LOOM_SERVER_GRPC_INFERENCE_MESSAGES_H_

#include "proto/loom/v1/inference.pb.h"
#include "scheduler/frontend/frontend.h"
#include "server/request_validation.h"

namespace loom {

// Field by field. max_tokens 0 means the server's default; set sampling fields override
// SamplingOptions' defaults.
InferenceRequest FromProto(const v1::GenerateRequest& request);

// The prompt of a Tokenize call (text or chat), as Generate would see it.
PromptInput PromptOf(const v1::TokenizeRequest& request);

// One stream message for an event. `logprobs`: fill GenerateResponse.logprobs; `top`:
// alternatives per token (0 = none). A finished, successful event carries the finish
// reason and usage.
v1::GenerateResponse ToResponse(const StreamEvent& event, bool logprobs, int top);

}  // namespace loom

#endif  // LOOM_SERVER_GRPC_INFERENCE_MESSAGES_H_
