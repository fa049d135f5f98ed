// EngineStatePublisher: forwards the engine's observer hooks to the metrics, and keeps the
// running / waiting / KV-page gauges current while the engine is idle. The engine reports
// its state only after a forward step, so a request cancelled (or expired) when nothing
// else runs would leave the gauges at their last step's values; a poller thread compares
// Engine::GetStats() with the last reported state every `interval` and, when it differs,
// reports it as an empty step (batch_tokens = 0) -- only when no request is running, since
// a running engine reports every step itself.
#ifndef LOOM_SERVER_ENGINE_STATE_PUBLISHER_H_
#define LOOM_SERVER_ENGINE_STATE_PUBLISHER_H_

#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/engine/engine.h"
#include "scheduler/engine/engine_observer.h"

namespace loom {

class EngineStatePublisher final : public EngineObserver {
 public:
  // `inner` must outlive this.
  explicit EngineStatePublisher(EngineObserver* inner) : inner_(inner) {}
  ~EngineStatePublisher() override;  // Stop()

  // Starts polling `engine` (which must stay alive until Stop()).
  void Start(const Engine* engine, absl::Duration interval = absl::Milliseconds(200));
  void Stop();

  void OnStep(int batch_tokens, int batch_sequences, int running, int waiting,
              int kv_pages_used, int kv_pages_total) override;
  void OnFirstToken(const std::string& adapter_id, absl::Duration ttft) override {
    inner_->OnFirstToken(adapter_id, ttft);
  }
  void OnToken(const std::string& adapter_id, absl::Duration inter_token) override {
    inner_->OnToken(adapter_id, inter_token);
  }
  void OnFinish(const std::string& adapter_id, const absl::Status& status, int prompt_tokens,
                int completion_tokens, absl::Duration e2e) override {
    inner_->OnFinish(adapter_id, status, prompt_tokens, completion_tokens, e2e);
  }
  void OnPreemption() override { inner_->OnPreemption(); }

 private:
  struct Reported {
    int running = -1, waiting = -1, kv_used = -1, kv_total = -1;
  };
  void Poll(const Engine* engine, absl::Duration interval);

  EngineObserver* const inner_;
  absl::Mutex mu_;
  Reported last_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace loom

#endif  // LOOM_SERVER_ENGINE_STATE_PUBLISHER_H_
