// Conversions between the loom.v1 wire messages and the engine's request/event types.
// Validation that needs only the request is here (INVALID_ARGUMENT naming the field);
// the engine checks the rest (context length, vocabulary range, stop strings, sampling
// ranges) at Submit.
#ifndef LOOM_SERVER_REQUEST_CONVERSION_H_
#define LOOM_SERVER_REQUEST_CONVERSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/loom/v1/inference.pb.h"
#include "scheduler/engine/engine_request.h"
#include "server/serving_model.h"

namespace loom {

inline constexpr int kDefaultMaxTokens = 256;
inline constexpr int kMaxStopStrings = 16;

// Prompt ids of `text` (Encode with the vocabulary's add_bos) or of a chat conversation
// (ChatML with the generation prompt). InvalidArgument for an empty conversation, an
// unknown role, or a chat prompt on a model without a chat template.
absl::StatusOr<std::vector<int32_t>> TokenizeText(const ServingModel& model,
                                                  const std::string& text);
absl::StatusOr<std::vector<int32_t>> TokenizeChat(const ServingModel& model,
                                                  const v1::ChatMessages& chat);

// The engine request for `req` (deadline left infinite; the caller sets it).
absl::StatusOr<EngineRequest> ToEngineRequest(const v1::GenerateRequest& req,
                                              const ServingModel& model);

// One stream message for an engine event. `logprobs`: fill GenerateResponse.logprobs;
// `top`: alternatives per token (0 = none).
v1::GenerateResponse ToResponse(const StreamEvent& event, bool logprobs, int top);

}  // namespace loom

#endif  // LOOM_SERVER_REQUEST_CONVERSION_H_
