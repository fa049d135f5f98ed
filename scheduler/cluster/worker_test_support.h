// Test support for Worker implementations: the real default model with an engine and an
// adapter store, a collector of one generation's WorkerEvents, and the engine's own
// output for the same request (the reference a worker must reproduce).
#ifndef LOOM_SCHEDULER_CLUSTER_WORKER_TEST_SUPPORT_H_
#define LOOM_SCHEDULER_CLUSTER_WORKER_TEST_SUPPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/lora/adapter_store.h"
#include "scheduler/cluster/worker.h"
#include "scheduler/engine/engine.h"
#include "server/serving_model.h"

namespace loom::testing {

// Everything a worker runs on. Build with Create(); members are destroyed engine first.
struct WorkerWorld {
  // Loads the default model with `threads` kernel threads; writes two synthetic PEFT
  // adapters (rank 8 and 16) under `adapter_dir`/a0 and /a1 (not registered).
  static absl::StatusOr<std::unique_ptr<WorkerWorld>> Create(const std::string& adapter_dir,
                                                             int threads = 2);
  ~WorkerWorld();

  EngineOptions engine_options;
  std::string adapter_dir;
  std::unique_ptr<ServingModel> model;
  std::unique_ptr<AdapterStore> store;
  std::unique_ptr<Engine> engine;
};

// Collects one generation's events.
class EventCollector {
 public:
  WorkerCallback Callback();
  // Waits for the finished event.
  void Wait();

  std::vector<int32_t> tokens() const;
  std::vector<float> logprobs() const;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs() const;
  WorkerEvent final_event() const;
  int events() const;
  int finished_events() const;
  bool event_after_final() const;  // an event arrived after the finished one

 private:
  mutable absl::Mutex mu_;
  std::vector<int32_t> tokens_ ABSL_GUARDED_BY(mu_);
  std::vector<float> logprobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::pair<int32_t, float>>> top_ ABSL_GUARDED_BY(mu_);
  WorkerEvent final_ ABSL_GUARDED_BY(mu_);
  int events_ ABSL_GUARDED_BY(mu_) = 0;
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool after_final_ ABSL_GUARDED_BY(mu_) = false;
};

// Runs `request` on `worker` to the end; the collector (check final_event().error).
std::unique_ptr<EventCollector> RunToEnd(Worker* worker, const WorkerRequest& request);

// The engine's tokens for the same generation, submitted directly (no stop strings).
absl::StatusOr<std::vector<int32_t>> EngineTokens(Engine* engine, const WorkerRequest& request);

// Token ids of `text` (no BOS) under the world's tokenizer.
std::vector<int32_t> Encode(const WorkerWorld& world, const std::string& text);

}  // namespace loom::testing

#endif  // LOOM_SCHEDULER_CLUSTER_WORKER_TEST_SUPPORT_H_
