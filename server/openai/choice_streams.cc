#include "server/openai/choice_streams.h"

namespace loom {

absl::StatusOr<std::shared_ptr<ChoiceStreams>> ChoiceStreams::Start(
    Frontend* frontend, const FrontendRequest& request, int n) {
  std::shared_ptr<ChoiceStreams> s(new ChoiceStreams(frontend, n));
  {
    absl::MutexLock l(&s->mu_);
    s->is_finished_.assign(static_cast<size_t>(n), false);
  }
  for (int i = 0; i < n; ++i) {
    FrontendRequest r = request;
    if (r.sampling.has_seed) r.sampling.seed += static_cast<uint64_t>(i);
    // The callback holds the object while its stream runs.
    std::shared_ptr<ChoiceStreams> self = s;
    absl::StatusOr<uint64_t> id = frontend->Submit(
        std::move(r), [self, i](const StreamEvent& e) { self->OnEvent(i, e); });
    if (!id.ok()) {
      s->CancelAll();
      return id.status();
    }
    absl::MutexLock l(&s->mu_);
    s->ids_.push_back(*id);
  }
  return s;
}

void ChoiceStreams::OnEvent(int index, const StreamEvent& event) {
  absl::MutexLock l(&mu_);
  if (is_finished_[index]) return;
  if (event.finished) {
    is_finished_[index] = true;
    ++finished_;
  }
  queue_.push_back({index, event});
}

bool ChoiceStreams::Next(Item* item, absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (queue_.empty()) return false;
  *item = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

bool ChoiceStreams::done() const {
  absl::MutexLock l(&mu_);
  return finished_ == n_ && queue_.empty();
}

void ChoiceStreams::CancelAll() {
  std::vector<uint64_t> ids;
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (!is_finished_[i]) ids.push_back(ids_[i]);
    }
  }
  for (uint64_t id : ids) frontend_->Cancel(id);
}

}  // namespace loom
