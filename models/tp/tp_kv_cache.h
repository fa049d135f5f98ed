// The KV caches of a tensor-parallel group: one PagedKvCache per rank, each holding that
// rank's kv heads (RankConfig), driven in lockstep so that every rank has the same page
// ids for every sequence. A BatchPlan built against plan_cache() is therefore valid for
// every rank's cache. On GPUs each rank's cache lives on its own device; here all are host
// memory. Not thread-safe (owned by the engine thread, like PagedKvCache).
#ifndef LOOM_MODELS_TP_TP_KV_CACHE_H_
#define LOOM_MODELS_TP_TP_KV_CACHE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/model_config.h"

namespace loom {

class TpKvCache {
 public:
  // `full` is the whole model's config; options apply to each rank's cache (page counts
  // are equal across ranks; a byte budget is per rank).
  static absl::StatusOr<std::unique_ptr<TpKvCache>> Create(const LlamaConfig& full, int world,
                                                           const KvCacheOptions& options);

  int world() const { return static_cast<int>(caches_.size()); }
  PagedKvCache* rank(int r) { return caches_[r].get(); }
  // Build plans against this one (rank 0's; all ranks' page tables are equal).
  const PagedKvCache& plan_cache() const { return *caches_[0]; }

  int32_t NewSequence();
  // ResourceExhausted (nothing changed) when the pool cannot supply the pages.
  absl::Status Reserve(int32_t seq, int32_t n_positions);
  void Release(int32_t seq);

 private:
  std::vector<std::unique_ptr<PagedKvCache>> caches_;
};

}  // namespace loom

#endif  // LOOM_MODELS_TP_TP_KV_CACHE_H_
