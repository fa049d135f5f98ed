// ClusterAdapterAdmin: AdapterAdmin over every worker that is up (AdminFanout), for the
// router's HTTP API. Without a fanout configured (--worker_admin_port[_offset]) every
// call is UNIMPLEMENTED, saying so.
#ifndef LOOM_SERVER_ROUTER_CLUSTER_ADAPTER_ADMIN_H_
#define LOOM_SERVER_ROUTER_CLUSTER_ADAPTER_ADMIN_H_

#include <string>
#include <vector>

#include "scheduler/cluster/cluster_frontend.h"
#include "server/adapter_admin.h"
#include "server/router/admin_fanout.h"

namespace loom {

class ClusterAdapterAdmin final : public AdapterAdmin {
 public:
  // Both must outlive this.
  ClusterAdapterAdmin(const ClusterFrontend* frontend, AdminFanout* fanout)
      : frontend_(frontend), fanout_(fanout) {}
  absl::Status Load(const std::string& id, const std::string& path,
                    const std::string& authorization) override;
  absl::Status Unload(const std::string& id, const std::string& authorization) override;

 private:
  std::vector<std::string> UpWorkers() const;

  const ClusterFrontend* const frontend_;
  AdminFanout* const fanout_;
};

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_CLUSTER_ADAPTER_ADMIN_H_
