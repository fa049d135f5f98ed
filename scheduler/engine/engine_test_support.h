// Test support for Worker implementations: the real default model with an engine and an
// adapter store (the reference every worker must reproduce), and a collector of one
// generation's WorkerEvents.
#ifndef LOOM_SCHEDULER_ENGINE_ENGINE_TEST_SUPPORT_H_
#define LOOM_SCHEDULER_ENGINE_ENGINE_TEST_SUPPORT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/lora_ops.h"
#include "models/llama/llama_model.h"
#include "models/lora/adapter_store.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/engine/engine.h"
#include "scheduler/worker/worker.h"

namespace loom::testing {

// Everything a worker runs on. Build with Create(); members are destroyed engine first.
struct WorkerWorld {
  // Loads the default model on the CPU backend with `threads` kernel threads; writes
  // two synthetic PEFT adapters (rank 8 and 16) under `adapter_dir`/a0 and /a1 (not
  // registered); starts an engine with `engine_options` (kv.n_pages 256 unless set).
  static absl::StatusOr<std::unique_ptr<WorkerWorld>> Create(
      const std::string& adapter_dir, int threads = 2,
      EngineOptions engine_options = DefaultOptions());
  static EngineOptions DefaultOptions() {
    EngineOptions o;
    o.max_running = 16;
    return o;
  }
  ~WorkerWorld();

  // Another engine on the same model and store.
  absl::StatusOr<std::unique_ptr<Engine>> NewEngine(EngineOptions options) const;

  EngineOptions engine_options;
  std::string adapter_dir;
  std::unique_ptr<kernels::ThreadPool> pool;
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<kernels::LoraOps> lora_ops;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat;
  std::unique_ptr<LlamaModel> model;
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

// Runs `request` on `worker` to the end; the collector (check final_event().error). A
// refusal at Start becomes the final event's error.
std::unique_ptr<EventCollector> RunToEnd(Worker* worker, const WorkerRequest& request);

// Token ids of `text` (no BOS) under the world's tokenizer.
std::vector<int32_t> Encode(const WorkerWorld& world, const std::string& text);

}  // namespace loom::testing

#endif  // LOOM_SCHEDULER_ENGINE_ENGINE_TEST_SUPPORT_H_
