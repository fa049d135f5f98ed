// Hooks through which the engine reports what it does (the server turns them into
// Prometheus metrics). Called on the engine thread; implementations must be cheap and
// non-blocking. Every method has a no-op default.
#ifndef LOOM_SCHEDULER_ENGINE_ENGINE_OBSERVER_H_
#define LOOM_SCHEDULER_ENGINE_ENGINE_OBSERVER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace loom {

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // After each forward step.
  virtual void OnStep(int batch_tokens, int batch_sequences, int running, int waiting,
                      int kv_pages_used, int kv_pages_total) {}
  virtual void OnFirstToken(const std::string& adapter_id, absl::Duration ttft) {}
  virtual void OnToken(const std::string& adapter_id, absl::Duration inter_token) {}
  virtual void OnFinish(const std::string& adapter_id, const absl::Status& status,
                        int prompt_tokens, int completion_tokens, absl::Duration e2e) {}
  virtual void OnPreemption() {}
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_ENGINE_ENGINE_OBSERVER_H_
