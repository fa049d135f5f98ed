#include "scheduler/cluster/client_stream.h"

#include <utility>

namespace loom {

absl::StatusOr<std::unique_ptr<ClientStream>> ClientStream::Create(
    const Tokenizer& tokenizer, const EngineRequest& request) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  std::vector<int32_t> stop_ids;
  if (request.stop_at_end_of_generation) stop_ids = tokenizer.end_of_generation_ids();
  absl::StatusOr<StopChecker> stop =
      StopChecker::Create(request.stop_strings, std::move(stop_ids), request.max_tokens);
  if (!stop.ok()) return stop.status();
  return std::unique_ptr<ClientStream>(
      new ClientStream(tokenizer, *std::move(stop),
                       static_cast<int>(request.prompt.size()), request.max_tokens));
}

ClientStream::ClientStream(const Tokenizer& tokenizer, StopChecker stop, int prompt_tokens,
                           int max_tokens)
    : detok_(tokenizer),
      stop_(std::move(stop)),
      prompt_tokens_(prompt_tokens),
      max_tokens_(max_tokens) {}

StreamEvent ClientStream::OnTokens(const WorkerEvent& event) {
  StreamEvent ev;
  for (size_t i = 0; i < event.token_ids.size() && !finished_; ++i) {
    const int32_t tok = event.token_ids[i];
    generated_.push_back(tok);
    ev.token_ids.push_back(tok);
    if (i < event.logprobs.size()) ev.token_logprobs.push_back(event.logprobs[i]);
    if (i < event.top_logprobs.size()) ev.top_logprobs.push_back(event.top_logprobs[i]);
    // Same per-token sequence as Engine::HandleLogits, so the text is identical.
    absl::StatusOr<std::string> piece = detok_.Push(tok);
    const StopChecker::Step st = stop_.Update(tok, piece.ok() ? *piece : std::string());
    ev.text += st.text;
    if (st.finished) {
      if (st.reason != FinishReason::kStop) ev.text += detok_.Flush();
      finished_ = true;
      ev.finished = true;
      ev.finish_reason = st.reason;
    }
  }
  ev.prompt_tokens = prompt_tokens_;
  ev.completion_tokens = static_cast<int>(generated_.size());
  return ev;
}

StreamEvent ClientStream::Finish(absl::Status error, bool end_of_generation) {
  StreamEvent ev;
  finished_ = true;
  ev.finished = true;
  if (error.ok()) {
    ev.finish_reason = end_of_generation ? FinishReason::kStop : FinishReason::kLength;
    ev.text = stop_.Flush();
    ev.text += detok_.Flush();
  } else {
    ev.error = std::move(error);
  }
  ev.prompt_tokens = prompt_tokens_;
  ev.completion_tokens = static_cast<int>(generated_.size());
  return ev;
}

}  // namespace loom
