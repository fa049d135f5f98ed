// The per-worker engine: ONE thread owns the model's running batch, the paged KV cache and
// the adapter leases; other threads only post to its inbox (Submit, Cancel) and read
// snapshots (GetStats). Every step is one forward call mixing the decode token of each
// running request with prefill chunks of newly admitted ones (continuous batching,
// chunked prefill under a token budget), grouped by adapter into SGMV segments.
//
// KV admission: a request is admitted when its prompt fits in free pages (FCFS, or fair
// share across adapters). When pages run out during decode, the NEWEST running request is
// preempted: its pages are freed and it is re-queued at the front; on readmission it
// recomputes its prompt + generated tokens (bitwise the same logits: batch invariance),
// so the client sees no token lost or repeated.
#ifndef LOOM_SCHEDULER_ENGINE_ENGINE_H_
#define LOOM_SCHEDULER_ENGINE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/llama_model.h"
#include "models/lora/adapter_store.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/engine/engine_observer.h"
#include "scheduler/engine/engine_request.h"

namespace loom {

enum class AdmissionPolicy { kFcfs, kFairShare };

struct EngineOptions {
  int max_batch_tokens = 512;    // tokens per forward step (decode + prefill chunks)
  int max_running = 64;          // sequences in the running batch
  int max_queued = 1024;         // waiting requests; beyond: ResourceExhausted
  AdmissionPolicy policy = AdmissionPolicy::kFcfs;
  KvCacheOptions kv;
  int max_context = 0;           // 0 = the model's; else min(model's, this)
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int32_t kv_pages_used = 0;
  int32_t kv_pages_total = 0;
  kernels::KvDtype kv_dtype = kernels::KvDtype::kF16;  // element type of the cached rows
  int64_t preemptions = 0;
  int64_t steps = 0;
  int last_batch_tokens = 0;
  int last_batch_sequences = 0;
  int max_context = 0;
};

class Engine {
 public:
  // `model`, `tokenizer`, `adapters` (may be null: base model only) and `observer` (may
  // be null) must outlive the engine. Starts the engine thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const LlamaModel* model,
                                                        const Tokenizer* tokenizer,
                                                        AdapterStore* adapters,
                                                        EngineObserver* observer,
                                                        const EngineOptions& options);
  ~Engine();  // Shutdown(absl::ZeroDuration()) then joins

  // Validates and queues a request; returns its id. Errors (nothing queued):
  // InvalidArgument (empty prompt, bad sampling value naming the field, prompt +
  // max_tokens beyond the context naming both numbers, bad stop string),
  // NotFound (unknown adapter), ResourceExhausted (queue full), Unavailable (shutting
  // down). After success, `callback` receives every event and exactly one final event.
  absl::StatusOr<uint64_t> Submit(EngineRequest request, StreamCallback callback);

  // Ends a request at the next step (final event with CANCELLED); no-op when done.
  void Cancel(uint64_t id);

  EngineStats GetStats() const;

  // Stops admitting; lets running and queued requests finish for up to `grace`, then
  // cancels the rest. Returns when the engine is idle.
  void Shutdown(absl::Duration grace);

  int max_context() const { return max_context_; }

 private:
  struct Sequence;
  Engine(const LlamaModel* model, const Tokenizer* tokenizer, AdapterStore* adapters,
         EngineObserver* observer, EngineOptions options, std::unique_ptr<PagedKvCache> kv,
         int max_context);

  void Loop();
  // Engine-thread helpers.
  void TakeInbox();
  void Admit();
  bool BuildStep(std::vector<SequenceChunk>* chunks, std::vector<Sequence*>* owners);
  void Preempt(Sequence* s);
  void Finish(Sequence* s, FinishReason reason, absl::Status error);
  void HandleLogits(Sequence* s, const float* logits);

  const LlamaModel* model_;
  const Tokenizer* tokenizer_;
  AdapterStore* adapters_;
  EngineObserver* observer_;
  const EngineOptions options_;
  const int max_context_;

  // Owned by the engine thread.
  std::unique_ptr<PagedKvCache> kv_;
  ForwardWorkspace ws_;
  std::vector<float> logits_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order (newest last)
  uint64_t admission_counter_ = 0;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Sequence>> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time hard_stop_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int queued_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_ENGINE_ENGINE_H_
