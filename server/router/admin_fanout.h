// AdminFanout: the router's adapter calls (LoadAdapter, UnloadAdapter, ListAdapters)
// sent to the loom.v1.Admin service of every worker that is up, in parallel (gRPC
// callback API, no thread per call). A worker "host:port" has its Admin service at
// host:admin_port where admin_port = the fixed port when set (Kubernetes: every pod
// listens on the same ports), else port + offset (several workers on one host).
//
// Results: LoadAdapter succeeds when every worker loaded it (the response is the first
// worker's AdapterInfo); UnloadAdapter when every worker unloaded it (draining_requests
// summed); ListAdapters is the union by id over the workers (first worker's entry wins),
// sorted by id. The first failure, prefixed with the worker's name, is the result
// otherwise (the workers that succeeded keep the adapter: no rollback). A worker that
// joins later loads adapters on demand from its adapter roots.
#ifndef LOOM_SERVER_ROUTER_ADMIN_FANOUT_H_
#define LOOM_SERVER_ROUTER_ADMIN_FANOUT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/loom/v1/admin.grpc.pb.h"

namespace loom {

class AdminFanout {
 public:
  // `fixed_port` > 0: every worker's admin port; else worker port + `port_offset`
  // (offset 0 and no fixed port: disabled, every call is UNIMPLEMENTED).
  AdminFanout(int fixed_port, int port_offset, absl::Duration deadline = absl::Seconds(120))
      : fixed_port_(fixed_port), port_offset_(port_offset), deadline_(deadline) {}

  bool enabled() const { return fixed_port_ > 0 || port_offset_ != 0; }
  // The admin target of worker `name` ("host:port"); InvalidArgument if it has no port.
  absl::StatusOr<std::string> AdminTarget(const std::string& worker_name) const;

  // Each runs the call on every worker in `workers` (names) with `authorization` (the
  // caller's header, forwarded; "" = none) and calls `done` once, on a gRPC thread.
  void LoadAdapter(const std::vector<std::string>& workers, const std::string& authorization,
                   const v1::LoadAdapterRequest& request,
                   std::function<void(absl::StatusOr<v1::LoadAdapterResponse>)> done);
  void UnloadAdapter(const std::vector<std::string>& workers,
                     const std::string& authorization, const v1::UnloadAdapterRequest& request,
                     std::function<void(absl::StatusOr<v1::UnloadAdapterResponse>)> done);
  void ListAdapters(const std::vector<std::string>& workers, const std::string& authorization,
                    std::function<void(absl::StatusOr<v1::ListAdaptersResponse>)> done);

 private:
  template <typename Req, typename Resp>
  struct Batch;
  v1::Admin::Stub* Stub(const std::string& target);
  template <typename Req, typename Resp, typename Method, typename Merge>
  void Run(const std::vector<std::string>& workers, const std::string& authorization,
           const Req& request, Method method, Merge merge,
           std::function<void(absl::StatusOr<Resp>)> done);

  const int fixed_port_;
  const int port_offset_;
  const absl::Duration deadline_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::Admin::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_ADMIN_FANOUT_H_
