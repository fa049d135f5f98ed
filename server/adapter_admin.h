// AdapterAdmin: runtime adapter loads and unloads for the HTTP API's vLLM-style
// POST /v1/load_lora_adapter and /v1/unload_lora_adapter (loom.v1.Admin has its own
// services). Local (--role=single): the AdapterManager (paths checked against the
// adapter roots). Cluster (--role=router): every worker that is up, through AdminFanout
// (server/router/cluster_adapter_admin.h). Both block the calling thread until done.
#ifndef LOOM_SERVER_ADAPTER_ADMIN_H_
#define LOOM_SERVER_ADAPTER_ADMIN_H_

#include <string>

#include "absl/status/status.h"
#include "server/adapter_manager.h"

namespace loom {

class AdapterAdmin {
 public:
  virtual ~AdapterAdmin() = default;
  // `authorization`: the caller's header, forwarded to workers by the cluster one.
  // Errors: AdapterManager::Load's (InvalidArgument, PermissionDenied, NotFound,
  // FailedPrecondition, ResourceExhausted).
  virtual absl::Status Load(const std::string& id, const std::string& path,
                            const std::string& authorization) = 0;
  // NotFound for an unknown id.
  virtual absl::Status Unload(const std::string& id, const std::string& authorization) = 0;
};

class LocalAdapterAdmin final : public AdapterAdmin {
 public:
  // `adapters` must outlive this.
  explicit LocalAdapterAdmin(AdapterManager* adapters) : adapters_(adapters) {}
  absl::Status Load(const std::string& id, const std::string& path,
                    const std::string&) override {
    return adapters_->Load(id, path, /*pin=*/false).status();
  }
  absl::Status Unload(const std::string& id, const std::string&) override {
    return adapters_->Unload(id).status();
  }

 private:
  AdapterManager* const adapters_;
};

}  // namespace loom

#endif  // LOOM_SERVER_ADAPTER_ADMIN_H_
