// Frontend: where a validated request enters the token-level core, and the text stream
// that comes back. Two implementations: LocalFrontend (one engine in this process,
// local_frontend.h) and ClusterFrontend (the router over many workers,
// scheduler/cluster/cluster_frontend.h). Both run every stream through the one text
// layer, ClientStream (client_stream.h), so gRPC, HTTP and `loom generate` get the same
// text for the same tokens.
#ifndef LOOM_SCHEDULER_FRONTEND_FRONTEND_H_
#define LOOM_SCHEDULER_FRONTEND_FRONTEND_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "models/sampling/sampling_options.h"
#include "models/sampling/stop_checker.h"

namespace loom {

// A request as the edge hands it on: every field already validated against the limits
// (server/request_validation.h), the prompt already templated and tokenized.
struct FrontendRequest {
  std::string adapter_id;           // "" = the base model
  std::vector<int32_t> prompt;      // token ids, non-empty
  SamplingOptions sampling;
  std::vector<std::string> stop_strings;
  int max_tokens = 256;             // >= 1
  bool stop_at_end_of_generation = true;  // eos / <|im_end|> end the request
  bool logprobs = false;            // each token's log-probability
  int top_logprobs = 0;             // alternatives per generated token
  absl::Time deadline = absl::InfiniteFuture();
};

// One generated token's alternatives: {token id, log-probability} best first.
using TopLogprobs = std::vector<std::pair<int32_t, float>>;

// Streamed to the request's callback, in order. The callback must not block (gRPC
// reactors and the HTTP handlers queue the event and return).
struct StreamEvent {
  // Text released by this event (complete UTF-8; stop strings removed). May be empty
  // while text is held back (partial character or possible stop-string prefix).
  std::string text;
  std::vector<int32_t> token_ids;        // tokens generated since the previous event
  std::vector<float> token_logprobs;     // log p of each token in token_ids (if requested)
  std::vector<TopLogprobs> top_logprobs; // per token, when top_logprobs > 0
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // Set on the final event when the request ended abnormally (cancelled, deadline,
  // unknown adapter, worker error); finish_reason is kNone then.
  absl::Status error;
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

using StreamCallback = std::function<void(const StreamEvent&)>;

class Frontend {
 public:
  virtual ~Frontend() = default;

  // Queues a request; returns its id. Errors (nothing queued): InvalidArgument (a bad
  // stop string), ResourceExhausted (queue full), Unavailable (shutting down), and the
  // worker's own refusals (scheduler/worker/worker.h). Then `callback` receives every
  // event and exactly one final event; errors found later (e.g. NOT_FOUND for an
  // unknown adapter) arrive as the final event's error. The final event may come before
  // Submit returns.
  virtual absl::StatusOr<uint64_t> Submit(FrontendRequest request, StreamCallback callback) = 0;

  // Ends a request (final event with CANCELLED); no-op when done or unknown. Callable
  // from any thread, also from inside a callback.
  virtual void Cancel(uint64_t id) = 0;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_FRONTEND_FRONTEND_H_
