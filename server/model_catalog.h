// ModelCatalog: what a client may name as its model, for loom.v1.Inference/ListModels
// and the OpenAI API's GET /v1/models: the base model, then every loaded adapter with the
// base as its parent (as vLLM lists LoRA adapters).
//   LocalModelCatalog  (--role=single): the adapter store's adapters.
//   ClusterModelCatalog (--role=router): the adapters resident on workers that are up.
// Thread-safe.
#ifndef LOOM_SERVER_MODEL_CATALOG_H_
#define LOOM_SERVER_MODEL_CATALOG_H_

#include <string>
#include <vector>

#include "models/lora/adapter_store.h"
#include "scheduler/cluster/cluster_frontend.h"

namespace loom {

struct ModelCard {
  std::string id;
  std::string parent;   // "" for the base model, else the base model's id
  int max_context = 0;
  int rank = 0;         // adapters: the largest LoRA rank (0 when unknown)
  bool ready = false;   // requests can run now
};

class ModelCatalog {
 public:
  virtual ~ModelCatalog() = default;
  // The base model first, then adapters sorted by id.
  virtual std::vector<ModelCard> List() const = 0;
  const std::string& base_id() const { return base_id_; }

 protected:
  explicit ModelCatalog(std::string base_id) : base_id_(std::move(base_id)) {}

 private:
  const std::string base_id_;
};

class LocalModelCatalog final : public ModelCatalog {
 public:
  // `store` must outlive this.
  LocalModelCatalog(std::string base_id, int max_context, const AdapterStore* store)
      : ModelCatalog(std::move(base_id)), max_context_(max_context), store_(store) {}
  std::vector<ModelCard> List() const override;

 private:
  const int max_context_;
  const AdapterStore* const store_;
};

class ClusterModelCatalog final : public ModelCatalog {
 public:
  // `frontend` must outlive this.
  ClusterModelCatalog(std::string base_id, int max_context, const ClusterFrontend* frontend)
      : ModelCatalog(std::move(base_id)), max_context_(max_context), frontend_(frontend) {}
  std::vector<ModelCard> List() const override;

 private:
  const int max_context_;
  const ClusterFrontend* const frontend_;
};

}  // namespace loom

#endif  // LOOM_SERVER_MODEL_CATALOG_H_
