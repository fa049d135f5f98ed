#include "server/model_catalog.h"

#include <set>

namespace loom {

std::vector<ModelCard> LocalModelCatalog::List() const {
  std::vector<ModelCard> out;
  out.push_back({base_id(), "", max_context_, 0, true});
  for (const AdapterInfo& a : store_->List()) {  // sorted by id
    if (a.state == AdapterState::kUnloading) continue;
    out.push_back({a.id, base_id(), max_context_, a.rank, a.state == AdapterState::kReady});
  }
  return out;
}

std::vector<ModelCard> ClusterModelCatalog::List() const {
  bool any_up = false;
  std::set<std::string> adapters;
  for (const ClusterWorkerStatus& w : frontend_->GetStatus().workers) {
    if (!w.up) continue;
    any_up = true;
    adapters.insert(w.load.resident_adapters.begin(), w.load.resident_adapters.end());
  }
  std::vector<ModelCard> out;
  out.push_back({base_id(), "", max_context_, 0, any_up});
  for (const std::string& id : adapters) out.push_back({id, base_id(), max_context_, 0, true});
  return out;
}

}  // namespace loom
