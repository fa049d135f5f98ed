// The router role of loomd (`loomd --role=router`): loom.v1.Inference and loom.v1.Admin
// over remote workers through a ClusterFrontend, /metrics and /healthz with per-worker
// gauges. The process loads only the tokenizer (router_model.h).
//
// Router flags (defined in router_flags.cc, read with RouterSettingsFromFlags):
//   --workers=host:port,...|dns:///name:port   the workers (worker_addresses.h)
//   --placement=punica|round_robin|least_loaded
//   --max_batch_size=32                        requests per worker (the router's cap)
//   --consolidation_interval=1s                Punica consolidation period (0 = off)
//   --resolve_interval=10s                     DNS re-resolution period
//   --idle_grace=60s                           idle time before a worker is reported idle
//   --worker_admin_port=0                      workers' loom.v1.Admin port (same on every
//                                              worker, as in Kubernetes); adapter calls
//                                              on the router go to every worker
//   --worker_admin_port_offset=0               else admin port = worker port + offset
//                                              (both 0: adapter calls UNIMPLEMENTED)
// Shared with the other roles (ServerOptions): host/port (Inference), admin_host/port,
// metrics_host/port, model (for the tokenizer), max_context, kv_page_size (must equal
// the workers'), TLS, admin_token_file, shutdown_grace, log_level.
#ifndef LOOM_SERVER_ROUTER_ROUTER_SERVER_H_
#define LOOM_SERVER_ROUTER_ROUTER_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/worker/worker.h"
#include "server/server_config.h"

namespace loom {

struct RouterSettings {
  std::string workers;
  std::string placement = "punica";
  int max_batch_size = 32;
  absl::Duration consolidation_interval = absl::Seconds(1);
  absl::Duration resolve_interval = absl::Seconds(10);
  absl::Duration idle_grace = absl::Seconds(60);
  int worker_admin_port = 0;
  int worker_admin_port_offset = 0;

  // InvalidArgument naming the setting.
  absl::Status Validate() const;
};

// From the router flags (router_flags.cc).
RouterSettings RouterSettingsFromFlags();

// Makes the Worker for one address ("ip:port").
using WorkerFactory =
    std::function<absl::StatusOr<std::unique_ptr<Worker>>(const std::string& address)>;

// Runs the router until SIGTERM/SIGINT (which the caller has blocked in every thread).
absl::Status ServeRouter(const ServerOptions& options, const RouterSettings& settings,
                         const WorkerFactory& factory);

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_ROUTER_SERVER_H_
