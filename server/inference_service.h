// loom.v1.Inference over the gRPC callback API. Generate is a ServerWriteReactor fed by
// the engine's stream callback: events are queued under a mutex, one write is in flight
// at a time (the next starts from OnWriteDone), client cancellation becomes
// Engine::Cancel, and the call finishes after the engine's final event.
#ifndef LOOM_SERVER_INFERENCE_SERVICE_H_
#define LOOM_SERVER_INFERENCE_SERVICE_H_

#include <atomic>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/loom/v1/inference.grpc.pb.h"
#include "scheduler/engine/engine.h"
#include "server/adapter_manager.h"
#include "server/metrics/server_metrics.h"
#include "server/serving_model.h"

namespace loom {

class InferenceService final : public v1::Inference::CallbackService {
 public:
  // Every pointer must outlive the service; `metrics` may be null. `serving` false makes
  // new calls fail UNAVAILABLE (set while draining for shutdown).
  InferenceService(const ServingModel* model, Engine* engine, AdapterManager* adapters,
                   ServerMetrics* metrics, const std::atomic<bool>* serving)
      : model_(model), engine_(engine), adapters_(adapters), metrics_(metrics),
        serving_(serving) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

 private:
  const ServingModel* const model_;
  Engine* const engine_;
  AdapterManager* const adapters_;
  ServerMetrics* const metrics_;
  const std::atomic<bool>* const serving_;
};

}  // namespace loom

#endif  // LOOM_SERVER_INFERENCE_SERVICE_H_
