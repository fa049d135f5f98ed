#include "scheduler/cluster/worker_proto.h"

#include "absl/strings/str_format.h"

namespace loom {

namespace pb = internal::v1;

pb::WorkerGenerateRequest ToProto(const WorkerRequest& r) {
  pb::WorkerGenerateRequest p;
  p.set_adapter_id(r.adapter_id);
  p.mutable_context()->Add(r.context.begin(), r.context.end());
  p.set_generated_before(r.generated_before);
  pb::WorkerSampling* s = p.mutable_sampling();
  s->set_temperature(r.sampling.temperature);
  s->set_top_k(r.sampling.top_k);
  s->set_top_p(r.sampling.top_p);
  s->set_min_p(r.sampling.min_p);
  s->set_repetition_penalty(r.sampling.repetition_penalty);
  s->set_frequency_penalty(r.sampling.frequency_penalty);
  s->set_presence_penalty(r.sampling.presence_penalty);
  s->set_penalty_last_n(r.sampling.penalty_last_n);
  s->set_seed(r.sampling.seed);
  s->set_has_seed(r.sampling.has_seed);
  p.set_max_new_tokens(r.max_new_tokens);
  p.set_stop_at_end_of_generation(r.stop_at_end_of_generation);
  p.set_logprobs(r.logprobs);
  p.set_top_logprobs(r.top_logprobs);
  return p;
}

WorkerRequest FromProto(const pb::WorkerGenerateRequest& p) {
  WorkerRequest r;
  r.adapter_id = p.adapter_id();
  r.context.assign(p.context().begin(), p.context().end());
  r.generated_before = p.generated_before();
  const pb::WorkerSampling& s = p.sampling();
  r.sampling.temperature = s.temperature();
  r.sampling.top_k = s.top_k();
  r.sampling.top_p = s.top_p();
  r.sampling.min_p = s.min_p();
  r.sampling.repetition_penalty = s.repetition_penalty();
  r.sampling.frequency_penalty = s.frequency_penalty();
  r.sampling.presence_penalty = s.presence_penalty();
  r.sampling.penalty_last_n = s.penalty_last_n();
  r.sampling.seed = s.seed();
  r.sampling.has_seed = s.has_seed();
  r.max_new_tokens = p.max_new_tokens();
  r.stop_at_end_of_generation = p.stop_at_end_of_generation();
  r.logprobs = p.logprobs();
  r.top_logprobs = p.top_logprobs();
  return r;
}

pb::WorkerGenerateResponse ToProto(const WorkerEvent& e) {
  pb::WorkerGenerateResponse p;
  p.mutable_token_ids()->Add(e.token_ids.begin(), e.token_ids.end());
  p.mutable_logprobs()->Add(e.logprobs.begin(), e.logprobs.end());
  for (const auto& alternatives : e.top_logprobs) {
    pb::TopLogprobs* t = p.add_top_logprobs();
    for (const auto& [id, logprob] : alternatives) {
      t->add_token_ids(id);
      t->add_logprobs(logprob);
    }
  }
  p.set_finished(e.finished);
  p.set_end_of_generation(e.end_of_generation);
  return p;
}

absl::StatusOr<WorkerEvent> FromProto(const pb::WorkerGenerateResponse& p) {
  const int n = p.token_ids_size();
  if (p.logprobs_size() != 0 && p.logprobs_size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker message has %d logprobs for %d tokens", p.logprobs_size(), n));
  }
  if (p.top_logprobs_size() != 0 && p.top_logprobs_size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker message has %d top_logprobs entries for %d tokens", p.top_logprobs_size(), n));
  }
  WorkerEvent e;
  e.token_ids.assign(p.token_ids().begin(), p.token_ids().end());
  e.logprobs.assign(p.logprobs().begin(), p.logprobs().end());
  for (const pb::TopLogprobs& t : p.top_logprobs()) {
    if (t.token_ids_size() != t.logprobs_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "worker message has an alternatives entry with %d ids and %d logprobs",
          t.token_ids_size(), t.logprobs_size()));
    }
    std::vector<std::pair<int32_t, float>>& out = e.top_logprobs.emplace_back();
    for (int i = 0; i < t.token_ids_size(); ++i) out.emplace_back(t.token_ids(i), t.logprobs(i));
  }
  e.finished = p.finished();
  e.end_of_generation = p.end_of_generation();
  return e;
}

pb::WorkerLoadReport ToProto(const WorkerLoad& l) {
  pb::WorkerLoadReport p;
  p.set_running(l.running);
  p.set_queued(l.queued);
  p.set_kv_pages_free(l.kv_pages_free);
  p.set_kv_pages_total(l.kv_pages_total);
  p.set_max_batch_size(l.max_batch_size);
  for (const std::string& a : l.resident_adapters) p.add_resident_adapters(a);
  p.set_steps(l.steps);
  p.set_step_seconds_ewma(l.step_seconds_ewma);
  p.set_draining(l.draining);
  return p;
}

WorkerLoad FromProto(const pb::WorkerLoadReport& p) {
  WorkerLoad l;
  l.running = p.running();
  l.queued = p.queued();
  l.kv_pages_free = p.kv_pages_free();
  l.kv_pages_total = p.kv_pages_total();
  l.max_batch_size = p.max_batch_size();
  l.resident_adapters.assign(p.resident_adapters().begin(), p.resident_adapters().end());
  l.steps = p.steps();
  l.step_seconds_ewma = p.step_seconds_ewma();
  l.draining = p.draining();
  return l;
}

}  // namespace loom
