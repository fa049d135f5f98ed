// loom.v1.Admin over the gRPC callback API. Every call first checks the bearer token
// (UNAUTHENTICATED on a missing or wrong one when a token is configured), DrainWorker too:
// it is a router's call, UNIMPLEMENTED here, but only after the token is checked, so an
// unauthenticated caller learns nothing about the role. LoadAdapter runs on the adapter
// loader thread and finishes from there.
#ifndef LOOM_SERVER_ADMIN_SERVICE_H_
#define LOOM_SERVER_ADMIN_SERVICE_H_

#include <atomic>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/loom/v1/admin.grpc.pb.h"
#include "scheduler/engine/engine.h"
#include "server/adapter_manager.h"
#include "server/bearer_auth.h"
#include "server/serving_model.h"

namespace loom {

inline constexpr char kLoomVersion[] = "loomd 0.1.0";

// AdapterInfo as its wire message.
v1::AdapterInfo ToProto(const AdapterInfo& a);

// True when `auth` requires no token or the call's authorization metadata carries it;
// otherwise finishes `reactor` with UNAUTHENTICATED (and logs the peer) and returns false.
bool AuthorizeAdminCall(const BearerAuth& auth, grpc::CallbackServerContext* ctx,
                        grpc::ServerUnaryReactor* reactor);

class AdminService final : public v1::Admin::CallbackService {
 public:
  // Every pointer must outlive the service.
  AdminService(const ServingModel* model, Engine* engine, AdapterManager* adapters,
               BearerAuth auth, const std::atomic<bool>* serving, int kv_page_tokens)
      : model_(model), engine_(engine), adapters_(adapters), auth_(std::move(auth)),
        serving_(serving), kv_page_tokens_(kv_page_tokens), start_(absl::Now()) {}

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

  const ServingModel* const model_;
  Engine* const engine_;
  AdapterManager* const adapters_;
  const BearerAuth auth_;
  const std::atomic<bool>* const serving_;
  const int kv_page_tokens_;
  const absl::Time start_;
};

}  // namespace loom

#endif  // LOOM_SERVER_ADMIN_SERVICE_H_
