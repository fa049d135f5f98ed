#include "scheduler/frontend/client_stream.h"

#include <utility>

namespace loom {

absl::StatusOr<std::unique_ptr<ClientStream>> ClientStream::Create(const Tokenizer& tokenizer,
                                                                   FrontendRequest request) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  std::vector<int32_t> stop_ids;
  if (request.stop_at_end_of_generation) stop_ids = tokenizer.end_of_generation_ids();
  absl::StatusOr<StopChecker> stop =
      StopChecker::Create(request.stop_strings, std::move(stop_ids), request.max_tokens);
  if (!stop.ok()) return stop.status();
  return std::unique_ptr<ClientStream>(
      new ClientStream(tokenizer, *std::move(stop), std::move(request)));
}

ClientStream::ClientStream(const Tokenizer& tokenizer, StopChecker stop,
                           FrontendRequest request)
    : request_(std::move(request)), detok_(tokenizer), stop_(std::move(stop)) {}

WorkerRequest ClientStream::Placement() const {
  WorkerRequest w;
  w.adapter_id = request_.adapter_id;
  w.context = request_.prompt;
  w.context.insert(w.context.end(), generated_.begin(), generated_.end());
  w.generated_before = static_cast<int>(generated_.size());
  w.sampling = request_.sampling;
  w.max_new_tokens = remaining();
  w.stop_at_end_of_generation = request_.stop_at_end_of_generation;
  w.logprobs = request_.logprobs || request_.top_logprobs > 0;
  w.top_logprobs = request_.top_logprobs;
  w.deadline = request_.deadline;
  return w;
}

StreamEvent ClientStream::OnTokens(const WorkerEvent& event) {
  StreamEvent ev;
  for (size_t i = 0; i < event.token_ids.size() && !finished_; ++i) {
    const int32_t tok = event.token_ids[i];
    generated_.push_back(tok);
    ev.token_ids.push_back(tok);
    if (i < event.logprobs.size()) ev.token_logprobs.push_back(event.logprobs[i]);
    if (i < event.top_logprobs.size()) ev.top_logprobs.push_back(event.top_logprobs[i]);
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
  ev.prompt_tokens = static_cast<int>(request_.prompt.size());
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
  ev.prompt_tokens = static_cast<int>(request_.prompt.size());
  ev.completion_tokens = static_cast<int>(generated_.size());
  return ev;
}

}  // namespace loom
