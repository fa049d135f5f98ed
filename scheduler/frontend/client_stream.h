// ClientStream: the ONE text layer. Workers stream token ids only; this turns them into
// the StreamEvents a client sees (text through an IncrementalDetokenizer and a
// StopChecker, logprobs per token, usage counts) and keeps the generated ids, so the
// request can be (re-)placed on any worker with context = prompt + generated()
// (Placement(): cancel + re-add with recomputation).
//
// Because the detokenizer and stop-checker state live here and not on a worker, a
// migration or failover is invisible to the client: the text stream continues from the
// same state, a stop string may span tokens produced by two workers, and usage counts
// every token once.
//
// Thread safety: none; one owner at a time (a frontend's control thread, or the local
// frontend's call under its mutex).
#ifndef LOOM_SCHEDULER_FRONTEND_CLIENT_STREAM_H_
#define LOOM_SCHEDULER_FRONTEND_CLIENT_STREAM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/sampling/stop_checker.h"
#include "models/tokenizer/incremental_detokenizer.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/frontend/frontend.h"
#include "scheduler/worker/worker.h"

namespace loom {

class ClientStream {
 public:
  // InvalidArgument for an empty prompt, max_tokens < 1 or a bad stop string (the
  // StopChecker's rules). `tokenizer` must outlive the stream.
  static absl::StatusOr<std::unique_ptr<ClientStream>> Create(const Tokenizer& tokenizer,
                                                              FrontendRequest request);

  // The worker request that continues this stream from where it is: context = prompt +
  // generated(), generated_before = generated().size(), max_new_tokens = remaining().
  // REQUIRES: !finished().
  WorkerRequest Placement() const;

  // Accounts the tokens of one worker event, in order, and returns the client event for
  // them. Tokens after the one that finishes the request (stop id, stop string,
  // max_tokens) are dropped. The returned event is final (finished = true) when the
  // request finished; a worker's finished flag or error is NOT looked at here.
  StreamEvent OnTokens(const WorkerEvent& event);

  // The final event for a request that ends without the stop checker finishing it:
  // `error` non-OK (cancelled, deadline, worker error: no text), or OK when the worker
  // ended generation itself (reason kStop if it saw end of generation, else kLength);
  // held text is released then. Returns a finished event; call at most once.
  StreamEvent Finish(absl::Status error, bool end_of_generation);

  const FrontendRequest& request() const { return request_; }
  bool finished() const { return finished_; }
  // Tokens accepted so far (what the client has been sent or will be sent).
  const std::vector<int32_t>& generated() const { return generated_; }
  int remaining() const { return request_.max_tokens - static_cast<int>(generated_.size()); }

 private:
  ClientStream(const Tokenizer& tokenizer, StopChecker stop, FrontendRequest request);

  const FrontendRequest request_;
  IncrementalDetokenizer detok_;
  StopChecker stop_;
  std::vector<int32_t> generated_;
  bool finished_ = false;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_FRONTEND_CLIENT_STREAM_H_
