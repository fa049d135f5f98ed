// What a client asks of an engine, and what the engine streams back.
#ifndef LOOM_SCHEDULER_ENGINE_ENGINE_REQUEST_H_
#define LOOM_SCHEDULER_ENGINE_ENGINE_REQUEST_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "models/sampling/sampling_options.h"
#include "models/sampling/stop_checker.h"

namespace loom {

struct EngineRequest {
  std::string adapter_id;           // "" = the base model
  std::vector<int32_t> prompt;      // token ids, already templated
  SamplingOptions sampling;
  std::vector<std::string> stop_strings;
  int max_tokens = 256;
  bool stop_at_end_of_generation = true;  // eos / <|im_end|> end the request
  int top_logprobs = 0;             // 0..20 alternatives per generated token
  absl::Time deadline = absl::InfiniteFuture();
};

// One generated token's alternatives: {token id, log-probability} best first.
using TopLogprobs = std::vector<std::pair<int32_t, float>>;

// Streamed to the request's callback, in order, on the engine thread. The callback must
// not block (gRPC reactors queue the event and return).
struct StreamEvent {
  // Text released by this event (complete UTF-8; stop strings removed). May be empty
  // while text is held back (partial character or possible stop-string prefix).
  std::string text;
  std::vector<int32_t> token_ids;  // tokens generated since the previous event
  std::vector<float> token_logprobs;  // log p of each token in token_ids (if requested)
  std::vector<TopLogprobs> top_logprobs;  // per token, when requested
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // Set on the final event when the request ended abnormally (cancelled, deadline,
  // adapter failed); finish_reason is kNone then.
  absl::Status error;
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

using StreamCallback = std::function<void(const StreamEvent&)>;

}  // namespace loom

#endif  // LOOM_SCHEDULER_ENGINE_ENGINE_REQUEST_H_
