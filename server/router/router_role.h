// `loomd --role=router`: ServeRouter (router_server.h) with the router flags and a
// RemoteWorker (scheduler/cluster/remote_worker.h) per worker address.
#ifndef LOOM_SERVER_ROUTER_ROUTER_ROLE_H_
#define LOOM_SERVER_ROUTER_ROUTER_ROLE_H_

#include "absl/status/status.h"
#include "server/server_config.h"

namespace loom {

// Runs until SIGTERM/SIGINT (blocked by main() in every thread). Errors: bad router
// flags, tokenizer load, listen failures.
absl::Status RunRouterRole(const ServerOptions& options);

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_ROUTER_ROLE_H_
