// EngineHost: the serving stack below the RPC services, shared by the roles that run an
// engine (single and worker): the base model, the adapter store and manager (roots,
// on-demand loads, preloads), the engine, and the publisher that feeds its state to the
// metrics. Built once at start; torn down publisher first, then the engine, then the rest.
#ifndef LOOM_SERVER_ENGINE_HOST_H_
#define LOOM_SERVER_ENGINE_HOST_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/lora/adapter_store.h"
#include "scheduler/engine/engine.h"
#include "server/adapter_manager.h"
#include "server/engine_state_publisher.h"
#include "server/metrics/server_metrics.h"
#include "server/server_config.h"
#include "server/serving_model.h"

namespace loom {

class EngineHost {
 public:
  // Loads the model (options.model, options.threads), sets up adapters (a failed preload
  // is logged, not fatal) and starts the engine. `metrics` must outlive the host.
  // Errors of ServingModel::Load, AdapterRoots::Create and Engine::Create.
  static absl::StatusOr<std::unique_ptr<EngineHost>> Start(const ServerOptions& options,
                                                          ServerMetrics* metrics);
  ~EngineHost();

  ServingModel* model() const { return model_.get(); }
  AdapterStore* store() const { return store_.get(); }
  AdapterManager* adapters() const { return adapters_.get(); }
  Engine* engine() const { return engine_.get(); }

 private:
  EngineHost() = default;

  std::unique_ptr<ServingModel> model_;
  std::unique_ptr<AdapterStore> store_;
  std::unique_ptr<AdapterManager> adapters_;
  std::unique_ptr<EngineStatePublisher> publisher_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace loom

#endif  // LOOM_SERVER_ENGINE_HOST_H_
