#include "server/engine_state_publisher.h"

namespace loom {

EngineStatePublisher::~EngineStatePublisher() { Stop(); }

void EngineStatePublisher::Start(const Engine* engine, absl::Duration interval) {
  thread_ = std::thread([this, engine, interval] { Poll(engine, interval); });
}

void EngineStatePublisher::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void EngineStatePublisher::OnStep(int batch_tokens, int batch_sequences, int running,
                                  int waiting, int kv_pages_used, int kv_pages_total) {
  {
    absl::MutexLock l(&mu_);
    last_ = {running, waiting, kv_pages_used, kv_pages_total};
  }
  inner_->OnStep(batch_tokens, batch_sequences, running, waiting, kv_pages_used,
                 kv_pages_total);
}

void EngineStatePublisher::Poll(const Engine* engine, absl::Duration interval) {
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), interval)) return;
    }
    const EngineStats s = engine->GetStats();
    bool changed = false;
    {
      absl::MutexLock l(&mu_);
      // Only when idle: while requests run, every step reports its own state.
      changed = s.running == 0 && (last_.running != s.running || last_.waiting != s.waiting ||
                last_.kv_used != s.kv_pages_used || last_.kv_total != s.kv_pages_total);
      if (changed) last_ = {s.running, s.waiting, s.kv_pages_used, s.kv_pages_total};
    }
    if (changed) {
      inner_->OnStep(0, 0, s.running, s.waiting, s.kv_pages_used, s.kv_pages_total);
    }
  }
}

}  // namespace loom
