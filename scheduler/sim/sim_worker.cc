#include "scheduler/sim/sim_worker.h"

#include <algorithm>

#include "scheduler/sim/workload.h"

namespace loom {

SimWorker::SimWorker(int id, const WorkerHardware* hardware, const PlacementOptions* placement,
                     WorkerView* view)
    : id_(id),
      hardware_(hardware),
      placement_(placement),
      kv_free_(hardware->kv_pages),
      view_(view) {
  view_->id = id;
  view_->kv_pages_total = hardware->kv_pages;
  view_->kv_pages_free = hardware->kv_pages;
  view_->idle_since_us = 0;
}

int32_t SimWorker::PagesFor(int tokens) const {
  const int page = hardware_->kv_page_size;
  return static_cast<int32_t>((tokens + page - 1) / page);
}

int SimWorker::TouchAdapter(int adapter) {
  auto it = cache_.find(adapter);
  if (it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return -1;
  }
  lru_.push_front(adapter);
  cache_[adapter] = lru_.begin();
  view_->AddAdapter(AdapterName(adapter));
  ++pending_loads_;
  ++adapter_loads_;
  if (static_cast<int>(lru_.size()) <= hardware_->adapter_cache_slots) return -1;
  const int victim = lru_.back();
  lru_.pop_back();
  cache_.erase(victim);
  const std::string name = AdapterName(victim);
  auto& names = view_->resident_adapters;
  auto pos = std::lower_bound(names.begin(), names.end(), name);
  if (pos != names.end() && *pos == name) names.erase(pos);
  return victim;
}

int SimWorker::Admit(uint64_t request, int adapter, int prompt_tokens, int generated,
                     int output_target) {
  SimSequence s;
  s.request = request;
  s.adapter = adapter;
  s.prefill_target = prompt_tokens + generated;
  s.generated_at_admission = generated;
  s.generated = generated;
  s.output_target = output_target;
  PlacementRequest r;
  r.context_tokens = s.prefill_target;
  r.max_new_tokens = output_target - generated;
  s.pages = PagesNeeded(r, *placement_);
  s.admission_seq = next_admission_++;
  kv_free_ -= s.pages;
  seqs_.push_back(s);
  return TouchAdapter(adapter);
}

SimSequence SimWorker::Remove(uint64_t request) {
  auto it = std::find_if(seqs_.begin(), seqs_.end(),
                         [&](const SimSequence& s) { return s.request == request; });
  SimSequence s = *it;
  kv_free_ += s.pages;
  seqs_.erase(it);
  return s;
}

double SimWorker::StartStep(std::vector<SimSequence>* evicted) {
  // Decode growth: a sequence past prefill writes one more token's KV this step.
  auto growth = [&](const SimSequence& s) -> int32_t {
    if (s.prefilled < s.prefill_target) return 0;
    const int tokens = s.prefill_target + (s.generated - s.generated_at_admission);
    return std::max<int32_t>(PagesFor(tokens) - s.pages, 0);
  };
  for (;;) {
    int32_t extra = 0;
    for (const SimSequence& s : seqs_) extra += growth(s);
    if (extra <= kv_free_ || seqs_.size() <= 1) break;
    kv_free_ += seqs_.back().pages;  // evict the NEWEST (keeps FCFS)
    evicted->push_back(seqs_.back());
    seqs_.pop_back();
  }
  StepShape shape;
  shape.adapter_loads = pending_loads_;
  pending_loads_ = 0;
  int budget = hardware_->max_batch_tokens;
  for (SimSequence& s : seqs_) {
    const int32_t g = growth(s);
    s.pages += g;
    kv_free_ -= g;
    s.step_decode = s.prefilled >= s.prefill_target && budget > 0;
    s.step_prefill = 0;
    if (s.step_decode) {
      --budget;
      ++shape.decode_tokens;
    }
  }
  for (SimSequence& s : seqs_) {
    if (s.prefilled >= s.prefill_target || budget <= 0) continue;
    s.step_prefill = std::min(s.prefill_target - s.prefilled, budget);
    budget -= s.step_prefill;
    shape.prefill_tokens += s.step_prefill;
  }
  std::vector<int> adapters;
  for (SimSequence& s : seqs_) {
    s.in_step = s.step_decode || s.step_prefill > 0;
    if (!s.in_step) continue;
    adapters.push_back(s.adapter);
    // Attention reads the whole context up to and including this step's tokens. A decode
    // step feeds the last generated token: its KV entry is number
    // prefill_target + (generated since admission).
    shape.kv_tokens += s.step_decode ? s.prefill_target + (s.generated - s.generated_at_admission)
                                     : s.prefilled + s.step_prefill;
  }
  std::sort(adapters.begin(), adapters.end());
  shape.distinct_adapters =
      static_cast<int>(std::unique(adapters.begin(), adapters.end()) - adapters.begin());
  stepping_ = true;
  ++steps_;
  return hardware_->latency.StepMs(shape);
}

int SimWorker::FinishStep(std::vector<SimSequence>* finished,
                          std::vector<uint64_t>* first_token) {
  int tokens = 0;
  std::vector<SimSequence> kept;
  kept.reserve(seqs_.size());
  for (SimSequence& s : seqs_) {
    if (s.in_step) {
      bool emits = s.step_decode;
      if (s.step_prefill > 0) {
        s.prefilled += s.step_prefill;
        emits = s.prefilled == s.prefill_target;
      }
      if (emits) {
        ++s.generated;
        ++tokens;
        if (s.generated == 1) first_token->push_back(s.request);
      }
      s.in_step = false;
      s.step_decode = false;
      s.step_prefill = 0;
    }
    if (s.generated >= s.output_target) {
      kv_free_ += s.pages;
      finished->push_back(s);
    } else {
      kept.push_back(s);
    }
  }
  seqs_.swap(kept);
  stepping_ = false;
  return tokens;
}

void SimWorker::SyncView(int64_t idle_since_us) {
  view_->running = static_cast<int>(seqs_.size());
  view_->queued = 0;
  view_->kv_pages_free = kv_free_;
  view_->idle_since_us = seqs_.empty() ? idle_since_us : -1;
}

}  // namespace loom
