// RouterGenerateReactor: one loom.v1.Inference/Generate call on the router. The same
// life as server/generate_reactor.h, with a ClusterFrontend in place of the Engine: the
// prompt is tokenized here (request_conversion), the frontend places it on a worker and
// streams StreamEvents back (text already detokenized and stop-checked by the frontend),
// client cancellation becomes ClusterFrontend::Cancel. Adapters are the workers'
// business (they load on demand from their adapter roots): an unknown adapter arrives
// as the final event's NOT_FOUND.
#ifndef LOOM_SERVER_ROUTER_ROUTER_GENERATE_REACTOR_H_
#define LOOM_SERVER_ROUTER_ROUTER_GENERATE_REACTOR_H_

#include <atomic>
#include <memory>

#include "grpcpp/grpcpp.h"
#include "proto/loom/v1/inference.pb.h"
#include "scheduler/cluster/cluster_frontend.h"
#include "server/metrics/server_metrics.h"
#include "server/serving_model.h"

namespace loom {

class RouterGenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  struct Deps {
    const ServingModel* model;       // tokenizer-only (server/router/router_model.h)
    ClusterFrontend* frontend;
    ServerMetrics* metrics;          // may be null
    const std::atomic<bool>* serving;
  };
  // Starts the call; the reactor deletes itself in OnDone.
  RouterGenerateReactor(Deps deps, grpc::CallbackServerContext* ctx,
                        const v1::GenerateRequest* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct State;

  const Deps deps_;
  grpc::CallbackServerContext* const ctx_;
  std::shared_ptr<State> state_;
};

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_ROUTER_GENERATE_REACTOR_H_
