// InProcessWorker: the Worker interface (worker.h) over an Engine in this process. Used
// directly by a single-process cluster, and by `loomd --role=worker` behind the Worker
// gRPC service (server/worker/), so both paths run the same request mapping.
//
// Mapping. WorkerRequest -> EngineRequest: context as the prompt, NO stop strings (the
// router checks those), stop_at_end_of_generation as given, max_new_tokens as max_tokens,
// generated_before as the sampler's skip_draws (a seeded request resumed after k tokens
// continues the same random sequence). StreamEvent -> WorkerEvent: token ids, logprobs
// when requested, end_of_generation when the engine stopped on an end-of-generation token
// (with no stop strings, its only kStop cause). The engine computes log-probabilities only
// with top_logprobs > 0, so logprobs alone asks it for one alternative and drops it.
//
// Adapters. A request naming an adapter first goes through options.ensure_adapter
// (loomd: AdapterManager::EnsureKnownAsync, which loads an unknown id on demand from the
// adapter roots, else fails NotFound); without it the engine's AdapterStore decides.
//
// Threads: Start / Cancel / Load / Close from any thread. Callbacks run on the engine
// thread, or on the adapter loader thread when an on-demand load fails; never under a
// lock of this class, so a callback may call Cancel or Start.
#ifndef LOOM_SCHEDULER_CLUSTER_INPROCESS_WORKER_H_
#define LOOM_SCHEDULER_CLUSTER_INPROCESS_WORKER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/lora/adapter_store.h"
#include "scheduler/cluster/worker.h"
#include "scheduler/engine/engine.h"

namespace loom {

// Makes `id` known to the engine's adapter store, then calls `done` exactly once (on the
// calling thread when nothing must be loaded, else on a loader thread) with OK or the
// reason it cannot be (NotFound, FailedPrecondition, ...).
using EnsureAdapterFn =
    std::function<void(const std::string& id, std::function<void(absl::Status)> done)>;

struct InProcessWorkerOptions {
  std::string name = "inproc:0";
  EnsureAdapterFn ensure_adapter;          // null: the engine's store decides
  const AdapterStore* adapters = nullptr;  // for Load().resident_adapters; may be null
  int max_batch_size = 0;                  // reported in Load(): EngineOptions.max_running
  double step_ewma_weight = 0.2;           // weight of the newest step-time sample
};

class InProcessWorker final : public Worker {
 public:
  // `engine` (and options.adapters) must outlive this.
  InProcessWorker(Engine* engine, InProcessWorkerOptions options);
  ~InProcessWorker() override;

  const std::string& name() const override { return options_.name; }

  // Errors: InvalidArgument (empty context, max_new_tokens < 1, generated_before out of
  // [0, context size), top_logprobs out of [0, 20], and the engine's own checks),
  // NotFound (unknown adapter, when known synchronously), ResourceExhausted (queue full),
  // Unavailable (closed, or the engine is shutting down). A failed on-demand adapter load
  // arrives as the finished event's error instead.
  absl::StatusOr<uint64_t> Start(WorkerRequest request, WorkerCallback callback) override;
  void Cancel(uint64_t handle) override;

  // Engine stats + adapter residency. step_seconds_ewma: each call that finds the engine
  // running now and at the previous call, with steps advanced, adds the sample
  // (elapsed time / steps advanced). After Close(): draining = true.
  absl::StatusOr<WorkerLoad> Load() override;

  // Starts draining: Start returns Unavailable afterwards and Load reports draining.
  // Requests already started run on (the engine's own Shutdown ends them).
  void Close();

 private:
  struct Call;
  struct Registry;  // open calls; shared with engine callbacks, which may outlive this

  // Submits `call` to `engine` (static: also used from loader threads, which may run
  // after this worker is gone). An error means nothing was submitted.
  static absl::Status Submit(Engine* engine, const std::shared_ptr<Registry>& registry,
                             const std::shared_ptr<Call>& call, EngineRequest request);
  // Delivers `ev`; the finished event exactly once, after which the call is forgotten.
  static void Deliver(Registry* registry, Call* call, const WorkerEvent& ev);

  Engine* const engine_;
  const InProcessWorkerOptions options_;
  const std::shared_ptr<Registry> registry_;

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Step-time estimate (see Load).
  int64_t last_steps_ ABSL_GUARDED_BY(mu_) = 0;
  bool last_running_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_sample_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  double step_ewma_ ABSL_GUARDED_BY(mu_) = 0.0;
};

// The conversion itself, exposed for tests: InvalidArgument from CheckWorkerRequest
// (worker_request_checks.h); the engine's own checks come at Submit.
absl::StatusOr<EngineRequest> WorkerToEngineRequest(const WorkerRequest& request);

}  // namespace loom

#endif  // LOOM_SCHEDULER_CLUSTER_INPROCESS_WORKER_H_
