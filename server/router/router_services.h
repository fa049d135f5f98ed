// The router role's gRPC services.
//
// loom.v1.Inference: Generate through the ClusterFrontend (RouterGenerateReactor);
// Tokenize and ListModels answered locally from the tokenizer-only model.
//
// loom.v1.Admin: GetStatus (per-worker load, up/draining/idle, router counters and scale
// signals), DrainWorker. Adapter calls (Load/Unload/ListAdapters) go to every worker that
// is up through AdminFanout (admin_fanout.h); without one they are UNIMPLEMENTED
// (workers still load adapters on demand from their adapter roots).
#ifndef LOOM_SERVER_ROUTER_ROUTER_SERVICES_H_
#define LOOM_SERVER_ROUTER_ROUTER_SERVICES_H_

#include <atomic>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/loom/v1/admin.grpc.pb.h"
#include "proto/loom/v1/inference.grpc.pb.h"
#include "scheduler/cluster/cluster_frontend.h"
#include "server/bearer_auth.h"
#include "server/metrics/server_metrics.h"
#include "server/router/admin_fanout.h"
#include "server/serving_model.h"

namespace loom {

class RouterInferenceService final : public v1::Inference::CallbackService {
 public:
  // Every pointer must outlive the service; `metrics` may be null.
  RouterInferenceService(const ServingModel* model, int max_context, ClusterFrontend* frontend,
                         ServerMetrics* metrics, const std::atomic<bool>* serving)
      : model_(model), max_context_(max_context), frontend_(frontend), metrics_(metrics),
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
  const int max_context_;
  ClusterFrontend* const frontend_;
  ServerMetrics* const metrics_;
  const std::atomic<bool>* const serving_;
};

// The GetStatus response for a frontend snapshot (exposed for tests).
void FillRouterStatus(const ClusterStatus& s, const std::string& base_model,
                      int kv_page_tokens, v1::GetStatusResponse* out);

class RouterAdminService final : public v1::Admin::CallbackService {
 public:
  // `fanout` may be null (adapter calls UNIMPLEMENTED).
  RouterAdminService(const ServingModel* model, ClusterFrontend* frontend, BearerAuth auth,
                     const std::atomic<bool>* serving, int kv_page_tokens,
                     AdminFanout* fanout = nullptr)
      : model_(model), frontend_(frontend), auth_(std::move(auth)), serving_(serving),
        kv_page_tokens_(kv_page_tokens), fanout_(fanout), start_(absl::Now()) {}

  grpc::ServerUnaryReactor* LoadAdapter(grpc::CallbackServerContext* ctx,
                                        const v1::LoadAdapterRequest* request,
                                        v1::LoadAdapterResponse* response) override;
  grpc::ServerUnaryReactor* UnloadAdapter(grpc::CallbackServerContext* ctx,
                                          const v1::UnloadAdapterRequest* request,
                                          v1::UnloadAdapterResponse* response) override;
  grpc::ServerUnaryReactor* ListAdapters(grpc::CallbackServerContext* ctx,
                                         const v1::ListAdaptersRequest* request,
                                         v1::ListAdaptersResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* DrainWorker(grpc::CallbackServerContext* ctx,
                                        const v1::DrainWorkerRequest* request,
                                        v1::DrainWorkerResponse* response) override;

 private:
  bool Authorized(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor) const;
  std::vector<std::string> UpWorkers() const;

  const ServingModel* const model_;
  ClusterFrontend* const frontend_;
  const BearerAuth auth_;
  const std::atomic<bool>* const serving_;
  const int kv_page_tokens_;
  AdminFanout* const fanout_;
  const absl::Time start_;
};

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_ROUTER_SERVICES_H_
