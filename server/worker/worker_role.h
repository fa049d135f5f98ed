// `loomd --role=worker`: the engine of one machine (or GPU) behind the internal Worker
// service, for a `loomd --role=router` in front.
//
// Serves, from the same settings as the single-process daemon (server/server_config.h):
//   --host:--port                  loom.internal.v1.Worker (+ grpc.health.v1, reflection);
//                                  NOT loom.v1.Inference (clients talk to the router)
//   --admin_host:--admin_port      loom.v1.Admin (adapters, status), as single
//   --metrics_host:--metrics_port  /metrics and /healthz, as single
// Adapters: --adapter_roots, --preload, --on_demand_adapters as single; a request naming
// an unknown adapter loads it on demand from the roots (else NOT_FOUND).
// SIGTERM/SIGINT: new Generate calls fail UNAVAILABLE and heartbeats report draining at
// once (the router stops placing here), running requests get --shutdown_grace to finish,
// the rest end UNAVAILABLE (the router re-places them), then the listeners close; exit 0.
#ifndef LOOM_SERVER_WORKER_WORKER_ROLE_H_
#define LOOM_SERVER_WORKER_WORKER_ROLE_H_

#include "absl/status/status.h"
#include "server/server_config.h"

namespace loom {

// Runs until SIGTERM/SIGINT (blocked by main() in every thread). Errors: model load,
// listen and configuration failures.
absl::Status RunWorkerRole(const ServerOptions& options);

}  // namespace loom

#endif  // LOOM_SERVER_WORKER_WORKER_ROLE_H_
