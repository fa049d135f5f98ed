#include "server/router/cluster_adapter_admin.h"

#include "absl/synchronization/notification.h"

namespace loom {
namespace {

// Runs an AdminFanout call and waits for its answer.
template <typename Resp, typename Call>
absl::Status Wait(Call call) {
  absl::Notification done;
  absl::Status result;
  call([&](absl::StatusOr<Resp> r) {
    result = r.status();
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace

std::vector<std::string> ClusterAdapterAdmin::UpWorkers() const {
  std::vector<std::string> out;
  for (const ClusterWorkerStatus& w : frontend_->GetStatus().workers) {
    if (w.up) out.push_back(w.name);
  }
  return out;
}

absl::Status ClusterAdapterAdmin::Load(const std::string& id, const std::string& path,
                                       const std::string& authorization) {
  v1::LoadAdapterRequest req;
  req.set_id(id);
  req.set_source(path);
  return Wait<v1::LoadAdapterResponse>([&](auto done) {
    fanout_->LoadAdapter(UpWorkers(), authorization, req, std::move(done));
  });
}

absl::Status ClusterAdapterAdmin::Unload(const std::string& id,
                                         const std::string& authorization) {
  v1::UnloadAdapterRequest req;
  req.set_id(id);
  return Wait<v1::UnloadAdapterResponse>([&](auto done) {
    fanout_->UnloadAdapter(UpWorkers(), authorization, req, std::move(done));
  });
}

}  // namespace loom
