// Stop conditions over one request's streamed output: stop strings, stop token ids and a
// token budget. Decides what text may be released to the client after each token.
#ifndef LOOM_MODELS_SAMPLING_STOP_CHECKER_H_
#define LOOM_MODELS_SAMPLING_STOP_CHECKER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom {

enum class FinishReason {
  kNone,    // still generating
  kStop,    // a stop string or stop token id was produced
  kLength,  // max_tokens tokens were generated
};

// OpenAI spelling: "stop", "length"; "" for kNone.
std::string_view FinishReasonName(FinishReason reason);

// Text contract: the bytes passed to Update() are the detokenized text of each token
// (complete UTF-8 characters). Text that could still be the beginning of a stop string is
// held back; once it can no longer start a match it is released. When a stop string
// appears, the text before it is released, the stop string and everything after it are
// dropped, and the checker finishes with kStop. With valid UTF-8 input and stop strings,
// released text is always cut at character boundaries.
// If several stop strings occur, the one starting earliest in the text wins.
//
// Thread safety: none; one StopChecker belongs to one request.
class StopChecker {
 public:
  struct Step {
    std::string text;  // to release to the client now (may be empty)
    bool finished = false;
    FinishReason reason = FinishReason::kNone;
    int stop_string_index = -1;  // index into stop_strings of the match, or -1
    int32_t stop_token = -1;     // the stop id that ended generation, or -1
  };

  // stop_strings: each non-empty valid UTF-8 (InvalidArgument otherwise).
  // stop_ids: token ids that end generation (eos, <|im_end|>, ...); their text is never
  //   released. max_tokens: > 0 (InvalidArgument otherwise); the token that reaches it
  //   ends generation with kLength unless it also stops it with kStop.
  static absl::StatusOr<StopChecker> Create(std::vector<std::string> stop_strings,
                                            std::vector<int32_t> stop_ids, int max_tokens);

  // Accounts one generated token and its text. Precedence: stop id, then stop string,
  // then max_tokens. A finishing step also releases any held text that is not part of a
  // stop string. Once finished, further calls return {"", true, reason} and change nothing.
  Step Update(int32_t token, std::string_view new_text);

  // Releases and clears the held-back text; for when generation ends for a reason the
  // checker did not see (cancellation, context full). Empty after a finishing Update.
  std::string Flush();

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason reason() const { return reason_; }
  int generated_tokens() const { return generated_; }
  // Bytes currently held back (a suffix that is a proper prefix of some stop string).
  const std::string& held_text() const { return pending_; }

 private:
  StopChecker(std::vector<std::string> stop_strings, std::vector<int32_t> stop_ids,
              int max_tokens);

  // Length of the longest suffix of pending_ that is a proper prefix of a stop string.
  size_t HeldLength() const;

  // Constant after construction.
  std::vector<std::string> stop_strings_;
  std::vector<int32_t> stop_ids_;
  int max_tokens_;

  std::string pending_;  // generated text not yet released
  int generated_ = 0;
  FinishReason reason_ = FinishReason::kNone;
};

}  // namespace loom

#endif  // LOOM_MODELS_SAMPLING_STOP_CHECKER_H_
