#include "server/request_conversion.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace loom {

absl::StatusOr<std::vector<int32_t>> TokenizeText(const ServingModel& model,
                                                  const std::string& text) {
  return model.tokenizer->Encode(text, model.vocab.add_bos);
}

absl::StatusOr<std::vector<int32_t>> TokenizeChat(const ServingModel& model,
                                                  const v1::ChatMessages& chat) {
  if (!model.chat.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chat: the model '%s' has no chat template", model.name));
  }
  if (chat.messages_size() == 0) {
    return absl::InvalidArgumentError("chat.messages is empty");
  }
  std::vector<ChatMessage> messages;
  for (const v1::ChatMessage& m : chat.messages()) messages.push_back({m.role(), m.content()});
  absl::StatusOr<std::vector<int32_t>> ids =
      model.chat->Render(messages, /*add_generation_prompt=*/true);
  if (!ids.ok() && ids.status().code() == absl::StatusCode::kInvalidArgument) {
    return absl::InvalidArgumentError(absl::StrCat("chat: ", ids.status().message()));
  }
  return ids;
}

namespace {

absl::Status FillSampling(const v1::SamplingParams& p, SamplingOptions* s) {
  s->temperature = p.temperature();
  if (p.has_top_p()) s->top_p = p.top_p();
  s->top_k = p.top_k();
  s->min_p = p.min_p();
  if (p.has_repetition_penalty()) s->repetition_penalty = p.repetition_penalty();
  s->frequency_penalty = p.frequency_penalty();
  s->presence_penalty = p.presence_penalty();
  if (p.has_penalty_last_n()) s->penalty_last_n = p.penalty_last_n();
  if (p.has_seed()) {
    s->seed = p.seed();
    s->has_seed = true;
  }
  return s->Validate();  // InvalidArgument naming the field and its value
}

}  // namespace

absl::StatusOr<EngineRequest> ToEngineRequest(const v1::GenerateRequest& req,
                                              const ServingModel& model) {
  EngineRequest r;
  r.adapter_id = req.adapter_id();
  absl::StatusOr<std::vector<int32_t>> prompt;
  switch (req.prompt_case()) {
    case v1::GenerateRequest::kText:
      if (req.text().empty()) return absl::InvalidArgumentError("text is empty");
      prompt = TokenizeText(model, req.text());
      break;
    case v1::GenerateRequest::kChat:
      prompt = TokenizeChat(model, req.chat());
      break;
    case v1::GenerateRequest::kTokenIds:
      if (req.token_ids().ids_size() == 0) {
        return absl::InvalidArgumentError("token_ids.ids is empty");
      }
      prompt = std::vector<int32_t>(req.token_ids().ids().begin(), req.token_ids().ids().end());
      break;
    default:
      return absl::InvalidArgumentError(
          "prompt: exactly one of text, chat or token_ids must be set");
  }
  if (!prompt.ok()) return prompt.status();
  r.prompt = *std::move(prompt);
  if (req.has_sampling()) {
    if (absl::Status s = FillSampling(req.sampling(), &r.sampling); !s.ok()) return s;
  }
  if (req.stop_size() > kMaxStopStrings) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "stop: %d strings given, at most %d allowed", req.stop_size(), kMaxStopStrings));
  }
  for (int i = 0; i < req.stop_size(); ++i) {
    if (req.stop(i).empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("stop[%d] is empty", i));
    }
    r.stop_strings.push_back(req.stop(i));
  }
  if (req.max_tokens() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_tokens = %d must be >= 0", req.max_tokens()));
  }
  r.max_tokens = req.max_tokens() == 0 ? kDefaultMaxTokens : req.max_tokens();
  r.stop_at_end_of_generation = !req.ignore_eos();
  if (req.top_logprobs() < 0 || req.top_logprobs() > 20) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_logprobs = %d must be in [0, 20]", req.top_logprobs()));
  }
  // The engine computes log-probabilities only with alternatives; ask for one and drop
  // it when only the token's own log-probability was requested.
  r.top_logprobs = req.top_logprobs() > 0 ? req.top_logprobs() : (req.logprobs() ? 1 : 0);
  return r;
}

v1::GenerateResponse ToResponse(const StreamEvent& event, bool logprobs, int top) {
  v1::GenerateResponse out;
  out.set_text(event.text);
  for (int32_t t : event.token_ids) out.add_token_ids(t);
  if (logprobs) {
    for (size_t i = 0; i < event.token_ids.size(); ++i) {
      v1::TokenLogprob* lp = out.add_logprobs();
      lp->set_token_id(event.token_ids[i]);
      if (i < event.token_logprobs.size()) lp->set_logprob(event.token_logprobs[i]);
      if (i < event.top_logprobs.size()) {
        const TopLogprobs& alts = event.top_logprobs[i];
        for (int k = 0; k < top && k < static_cast<int>(alts.size()); ++k) {
          v1::TopLogprob* t = lp->add_top();
          t->set_token_id(alts[k].first);
          t->set_logprob(alts[k].second);
        }
      }
    }
  }
  if (event.finished && event.error.ok()) {
    out.set_finish_reason(event.finish_reason == FinishReason::kLength
                              ? v1::FINISH_REASON_LENGTH
                              : v1::FINISH_REASON_STOP);
    out.mutable_usage()->set_prompt_tokens(event.prompt_tokens);
    out.mutable_usage()->set_completion_tokens(event.completion_tokens);
  }
  return out;
}

}  // namespace loom
