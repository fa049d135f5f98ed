// ClientStream: the client-facing half of one request in the cluster. Workers stream
// token ids only; this turns them into the StreamEvents a client sees (text through an
// IncrementalDetokenizer and a StopChecker, usage counts), exactly as the single-process
// engine does, and keeps the generated ids so the request can be re-placed on another
// worker with context = prompt + generated() (cancel + re-add with recomputation).
//
// Because the detokenizer and stop-checker state live here and not on a worker, a
// migration or failover is invisible to the client: the text stream continues from the
// same state, a stop string may span tokens produced by two workers, and usage counts
// every token once.
//
// Thread safety: none; one owner (the frontend's control thread).
#ifndef LOOM_SCHEDULER_CLUSTER_CLIENT_STREAM_H_
#define LOOM_SCHEDULER_CLUSTER_CLIENT_STREAM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/sampling/stop_checker.h"
#include "models/tokenizer/incremental_detokenizer.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/cluster/worker.h"
#include "scheduler/engine/engine_request.h"

namespace loom {

class ClientStream {
 public:
  // Validates the text-side parts of `request` (stop strings, max_tokens >= 1, prompt
  // non-empty); InvalidArgument otherwise. `tokenizer` must outlive the stream.
  static absl::StatusOr<std::unique_ptr<ClientStream>> Create(const Tokenizer& tokenizer,
                                                              const EngineRequest& request);

  // Accounts the tokens of one worker event, in order, and returns the client event for
  // them. Tokens after the one that finishes the request (stop id, stop string,
  // max_tokens) are dropped. The returned event is final (finished = true) when the
  // request finished; a worker's finished flag or error is NOT looked at here.
  StreamEvent OnTokens(const WorkerEvent& event);

  // The final event for a request that ends without the stop checker finishing it:
  // `error` non-OK (cancelled, deadline, worker error: no text), or OK when the worker
  // ended generation itself (reason kStop if it saw end of generation, else kLength);
  // held text is released then. Returns a finished event; no-op-safe to call once only.
  StreamEvent Finish(absl::Status error, bool end_of_generation);

  bool finished() const { return finished_; }
  int prompt_tokens() const { return prompt_tokens_; }
  int max_tokens() const { return max_tokens_; }
  // Tokens accepted so far (what the client has been sent or will be sent).
  const std::vector<int32_t>& generated() const { return generated_; }
  int remaining() const { return max_tokens_ - static_cast<int>(generated_.size()); }

 private:
  ClientStream(const Tokenizer& tokenizer, StopChecker stop, int prompt_tokens,
               int max_tokens);

  IncrementalDetokenizer detok_;
  StopChecker stop_;
  const int prompt_tokens_;
  const int max_tokens_;
  std::vector<int32_t> generated_;
  bool finished_ = false;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_CLUSTER_CLIENT_STREAM_H_
