// The router role's loom.v1.Admin service (its loom.v1.Inference is the one
// InferenceService, server/inference_service.h, over the ClusterFrontend).
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
#include "scheduler/cluster/cluster_frontend.h"
#include "server/admin_service.h"
#include "server/bearer_auth.h"
#include "server/router/admin_fanout.h"
#include "server/serving_model.h"

namespace loom {

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
  bool Authorized(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor) const {
    return AuthorizeAdminCall(auth_, ctx, reactor);
  }
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
