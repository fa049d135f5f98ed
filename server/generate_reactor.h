// GenerateReactor: one loom.v1.Inference/Generate call.
//
// Threads: gRPC callback threads (Start, OnWriteDone, OnCancel, OnDone), the loader
// thread (after an on-demand adapter load) and the engine thread (stream events) all meet
// in a shared State guarded by its mutex; the State outlives the reactor (the engine's
// callback keeps it), so a late event after OnDone is harmless.
// Life: Start -> [on-demand load] -> Engine::Submit -> events queued, one write in flight
// -> final event -> remaining writes -> Finish(status) -> OnDone deletes the reactor.
#ifndef LOOM_SERVER_GENERATE_REACTOR_H_
#define LOOM_SERVER_GENERATE_REACTOR_H_

#include <atomic>
#include <memory>

#include "grpcpp/grpcpp.h"
#include "proto/loom/v1/inference.pb.h"
#include "scheduler/engine/engine.h"
#include "server/adapter_manager.h"
#include "server/metrics/server_metrics.h"
#include "server/serving_model.h"

namespace loom {

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  struct Deps {
    const ServingModel* model;
    Engine* engine;
    AdapterManager* adapters;
    ServerMetrics* metrics;  // may be null
    const std::atomic<bool>* serving;
  };
  // Starts the call; the reactor deletes itself in OnDone.
  GenerateReactor(Deps deps, grpc::CallbackServerContext* ctx,
                  const v1::GenerateRequest* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct State;

  void Start();
  // Validated request -> Submit (after any on-demand load).
  void Submit(EngineRequest request);

  const Deps deps_;
  grpc::CallbackServerContext* const ctx_;
  const v1::GenerateRequest* const request_;
  std::shared_ptr<State> state_;
};

}  // namespace loom

#endif  // LOOM_SERVER_GENERATE_REACTOR_H_
