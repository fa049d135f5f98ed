#include "server/grpc_inference_messages.h"

namespace loom {
namespace {

void FillSampling(const v1::SamplingParams& p, SamplingOptions* s) {
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
}

std::vector<ChatMessage> ChatOf(const v1::ChatMessages& chat) {
  std::vector<ChatMessage> out;
  for (const v1::ChatMessage& m : chat.messages()) out.push_back({m.role(), m.content()});
  return out;
}

}  // namespace

InferenceRequest FromProto(const v1::GenerateRequest& req) {
  InferenceRequest r;
  r.adapter_id = req.adapter_id();
  switch (req.prompt_case()) {
    case v1::GenerateRequest::kText:
      r.prompt.kind = PromptInput::Kind::kText;
      r.prompt.text = req.text();
      r.prompt.field = "text";
      break;
    case v1::GenerateRequest::kChat:
      r.prompt.kind = PromptInput::Kind::kChat;
      r.prompt.chat = ChatOf(req.chat());
      r.prompt.field = "chat.messages";
      break;
    case v1::GenerateRequest::kTokenIds:
      r.prompt.kind = PromptInput::Kind::kTokenIds;
      r.prompt.token_ids.assign(req.token_ids().ids().begin(), req.token_ids().ids().end());
      r.prompt.field = "token_ids.ids";
      break;
    default:
      r.prompt.field = "prompt";
  }
  if (req.has_sampling()) FillSampling(req.sampling(), &r.sampling);
  r.stop.assign(req.stop().begin(), req.stop().end());
  if (req.max_tokens() != 0) r.max_tokens = req.max_tokens();
  r.ignore_eos = req.ignore_eos();
  r.logprobs = req.logprobs();
  r.top_logprobs = req.top_logprobs();
  return r;
}

PromptInput PromptOf(const v1::TokenizeRequest& req) {
  PromptInput p;
  switch (req.input_case()) {
    case v1::TokenizeRequest::kText:
      p.kind = PromptInput::Kind::kText;
      p.text = req.text();
      p.field = "text";
      break;
    case v1::TokenizeRequest::kChat:
      p.kind = PromptInput::Kind::kChat;
      p.chat = ChatOf(req.chat());
      p.field = "chat.messages";
      break;
    default:
      p.field = "input";
  }
  return p;
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
