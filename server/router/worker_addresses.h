// Which workers the router fronts: `--workers` is a comma-separated list whose items are
//   host:port                 one worker (IPv6 as [addr]:port)
//   dns:///name:port          every address `name` resolves to (getaddrinfo), each with
//                             `port`: a Kubernetes headless Service lists one A record
//                             per ready pod. Re-resolved periodically, so pods that
//                             appear later join.
// Worker names are the resolved "ip:port" (or the literal host:port item).
#ifndef LOOM_SERVER_ROUTER_WORKER_ADDRESSES_H_
#define LOOM_SERVER_ROUTER_WORKER_ADDRESSES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loom {

struct WorkerSpecItem {
  bool dns = false;   // resolve `host` on every refresh
  std::string host;   // literal host (no brackets) or DNS name
  int port = 0;
};

// InvalidArgument naming the item for an empty list, an item without a port, a port
// outside [1, 65535], or an empty host.
absl::StatusOr<std::vector<WorkerSpecItem>> ParseWorkerSpec(const std::string& spec);

// "host:port" ("[v6]:port" for IPv6 literals).
std::string JoinHostPort(const std::string& host, int port);

// The worker addresses of `items` now: literal items as given, DNS items as each
// resolved address (deduplicated, sorted per item). A DNS name that does not resolve
// contributes nothing (its error is returned only if NO item gave an address).
absl::StatusOr<std::vector<std::string>> ResolveWorkers(
    const std::vector<WorkerSpecItem>& items);

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_WORKER_ADDRESSES_H_
