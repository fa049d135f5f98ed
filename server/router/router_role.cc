#include "server/router/router_role.h"

#include <memory>
#include <utility>

#include "scheduler/cluster/remote_worker.h"
#include "server/router/router_server.h"

namespace loom {

absl::Status RunRouterRole(const ServerOptions& options) {
  return ServeRouter(
      options, RouterSettingsFromFlags(),
      [](const std::string& address) -> absl::StatusOr<std::unique_ptr<Worker>> {
        RemoteWorkerOptions ro;
        ro.target = address;
        absl::StatusOr<std::unique_ptr<RemoteWorker>> w = RemoteWorker::Create(ro);
        if (!w.ok()) return w.status();
        return std::unique_ptr<Worker>(*std::move(w));
      });
}

}  // namespace loom
