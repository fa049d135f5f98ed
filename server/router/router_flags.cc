#include "absl/flags/flag.h"
#include "server/router/router_server.h"

ABSL_FLAG(std::string, workers, "",
          "router: workers as host:port,... or dns:///name:port (every resolved address)");
ABSL_FLAG(std::string, placement, "punica", "router: punica, round_robin or least_loaded");
ABSL_FLAG(int, max_batch_size, 32, "router: requests placed per worker at most");
ABSL_FLAG(absl::Duration, consolidation_interval, absl::Seconds(1),
          "router: Punica consolidation period (0 = off)");
ABSL_FLAG(absl::Duration, resolve_interval, absl::Seconds(10),
          "router: how often dns:/// worker names are re-resolved");
ABSL_FLAG(absl::Duration, idle_grace, absl::Seconds(60),
          "router: idle time before a worker is reported releasable");

ABSL_FLAG(int, worker_admin_port, 0,
          "router: the workers' loom.v1.Admin port, for forwarding adapter calls (0 = off)");
ABSL_FLAG(int, worker_admin_port_offset, 0,
          "router: else the workers' admin port = worker port + this (0 = off)");

namespace loom {

RouterSettings RouterSettingsFromFlags() {
  RouterSettings s;
  s.workers = absl::GetFlag(FLAGS_workers);
  s.placement = absl::GetFlag(FLAGS_placement);
  s.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  s.consolidation_interval = absl::GetFlag(FLAGS_consolidation_interval);
  s.resolve_interval = absl::GetFlag(FLAGS_resolve_interval);
  s.idle_grace = absl::GetFlag(FLAGS_idle_grace);
  s.worker_admin_port = absl::GetFlag(FLAGS_worker_admin_port);
  s.worker_admin_port_offset = absl::GetFlag(FLAGS_worker_admin_port_offset);
  return s;
}

}  // namespace loom
