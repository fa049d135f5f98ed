// The per-worker engine, and the in-process Worker (scheduler/worker/worker.h): token ids
// in, token ids out. ONE thread owns the model's running batch, the paged KV cache and
// the adapter leases; other threads only post to its inbox (Start, Cancel) and read
// snapshots (GetStats, Load). Every step is one forward call mixing the decode token of
// each running request with prefill chunks of newly admitted ones (continuous batching,
// chunked prefill under a token budget), grouped by adapter into SGMV segments.
//
// KV admission: a request is admitted when its context fits in free pages (FCFS, or fair
// share across adapters). When pages run out during decode, the NEWEST running request is
// preempted: its pages are freed and it is re-queued at the front; on readmission it
// recomputes its context + generated tokens (bitwise the same logits: batch invariance),
// so the client sees no token lost or repeated.
//
// A request ends on an end-of-generation id (when stop_at_end_of_generation), after
// max_new_tokens, or with an error; text, stop strings and usage are the frontend's
// (scheduler/frontend/client_stream.h).
//
// Threads: Start / Cancel / Load / GetStats / Close from any thread. Callbacks run on
// the engine thread, or on the thread that completes an on-demand adapter load
// (options.ensure_adapter), never under an engine lock: a callback may call Cancel.
#ifndef LOOM_SCHEDULER_ENGINE_ENGINE_H_
#define LOOM_SCHEDULER_ENGINE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/llama_model.h"
#include "models/lora/adapter_store.h"
#include "scheduler/engine/engine_observer.h"
#include "scheduler/worker/worker.h"

namespace loom {

enum class AdmissionPolicy { kFcfs, kFairShare };

// Makes `id` known to the engine's adapter store, then calls `done` exactly once (on the
// calling thread when nothing must be loaded, else on a loader thread) with OK or the
// reason it cannot be (NotFound, FailedPrecondition, ...). `done` must not be called
// after the engine is destroyed (loomd stops its loader thread first).
using EnsureAdapterFn =
    std::function<void(const std::string& id, std::function<void(absl::Status)> done)>;

struct EngineOptions {
  std::string name = "engine";   // Worker::name()
  int max_batch_tokens = 512;    // tokens per forward step (decode + prefill chunks)
  int max_running = 64;          // sequences in the running batch
  int max_queued = 1024;         // waiting requests; beyond: ResourceExhausted
  AdmissionPolicy policy = AdmissionPolicy::kFcfs;
  KvCacheOptions kv;
  int max_context = 0;           // 0 = the model's; else min(model's, this)
  EnsureAdapterFn ensure_adapter;  // null: the adapter store alone decides at Start
  double step_ewma_weight = 0.2;   // weight of the newest step time in Load()
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
  double step_seconds_ewma = 0.0;
  // Distinct adapter ids of running / waiting requests, sorted ("" = base omitted).
  std::vector<std::string> running_adapters;
  std::vector<std::string> waiting_adapters;
};

class Engine final : public Worker {
 public:
  // `model`, `adapters` (may be null: base model only) and `observer` (may be null) must
  // outlive the engine. `end_of_generation_ids`: the vocabulary's eos / end-of-turn ids.
  // Starts the engine thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const LlamaModel* model, std::vector<int32_t> end_of_generation_ids,
      AdapterStore* adapters, EngineObserver* observer, const EngineOptions& options);
  ~Engine() override;  // Shutdown(absl::ZeroDuration()) then joins

  const std::string& name() const override { return options_.name; }

  // Queues a request; returns its handle. Errors (nothing queued): InvalidArgument
  // (empty context, token id outside the vocabulary, max_new_tokens < 1,
  // generated_before or top_logprobs out of range, context + max_new_tokens beyond the
  // context naming both numbers, a bad sampling value naming the field), NotFound
  // (unknown adapter, when known at once), ResourceExhausted (queue full, or more tokens
  // than the whole KV cache), Unavailable (closed or shutting down). A failed on-demand
  // adapter load arrives as the finished event's error instead.
  absl::StatusOr<uint64_t> Start(WorkerRequest request, WorkerCallback callback) override;

  // Ends a request at the next step (finished event with CANCELLED); no-op when done.
  void Cancel(uint64_t handle) override;

  // Engine stats + adapter residency; draining after Close() or Shutdown().
  absl::StatusOr<WorkerLoad> Load() override;

  EngineStats GetStats() const;

  // Starts draining: Start returns Unavailable, Load reports draining; running and
  // queued requests go on.
  void Close();

  // Stops admitting; lets running and queued requests finish for up to `grace`, then
  // cancels the rest. Returns when the engine is idle.
  void Shutdown(absl::Duration grace);

  int max_context() const { return max_context_; }

 private:
  struct Sequence;
  Engine(const LlamaModel* model, std::vector<int32_t> eog, AdapterStore* adapters,
         EngineObserver* observer, EngineOptions options, std::unique_ptr<PagedKvCache> kv,
         int max_context);

  // The request's invariant checks (see Start).
  absl::Status Check(const WorkerRequest& request) const;
  // Leases the sequence's adapter from the store (NotFound when unknown).
  absl::Status Lease(Sequence* s) const;
  // Posts `s` to the engine thread; Unavailable / ResourceExhausted as for Start.
  absl::Status Enqueue(std::unique_ptr<Sequence> s);
  // After an on-demand load of the adapter of parked sequence `handle`.
  void OnAdapterReady(uint64_t handle, absl::Status status);

  void Loop();
  // Engine-thread helpers.
  void TakeInbox();
  void Admit();
  bool BuildStep(std::vector<SequenceChunk>* chunks, std::vector<Sequence*>* owners);
  void Preempt(Sequence* s);
  void Finish(Sequence* s, bool end_of_generation, absl::Status error);
  void HandleLogits(Sequence* s, const float* logits);
  void PublishStats(int batch_tokens, int batch_sequences, absl::Duration step_time);

  const LlamaModel* model_;
  const std::vector<int32_t> eog_ids_;
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

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Sequence>> inbox_ ABSL_GUARDED_BY(mu_);
  // Waiting for options_.ensure_adapter, by handle.
  std::map<uint64_t, std::unique_ptr<Sequence>> loading_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
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
