#include "models/tp/tp_kv_cache.h"

#include "absl/strings/str_format.h"
#include "models/tp/tp_weights.h"

namespace loom {

absl::StatusOr<std::unique_ptr<TpKvCache>> TpKvCache::Create(const LlamaConfig& full,
                                                             int world,
                                                             const KvCacheOptions& options) {
  if (world < 1 || full.n_kv_heads % world != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TpKvCache: %d ranks do not divide n_kv_heads %d", world, full.n_kv_heads));
  }
  auto kv = std::unique_ptr<TpKvCache>(new TpKvCache());
  const LlamaConfig rc = RankConfig(full, world);
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<std::unique_ptr<PagedKvCache>> c = PagedKvCache::Create(rc, options);
    if (!c.ok()) return c.status();
    kv->caches_.push_back(*std::move(c));
  }
  return kv;
}

int32_t TpKvCache::NewSequence() {
  const int32_t seq = caches_[0]->NewSequence();
  for (size_t r = 1; r < caches_.size(); ++r) caches_[r]->NewSequence();  // same slot
  return seq;
}

absl::Status TpKvCache::Reserve(int32_t seq, int32_t n_positions) {
  if (absl::Status s = caches_[0]->Reserve(seq, n_positions); !s.ok()) return s;
  for (size_t r = 1; r < caches_.size(); ++r) {
    absl::Status s = caches_[r]->Reserve(seq, n_positions);
    if (!s.ok() || caches_[r]->Pages(seq) != caches_[0]->Pages(seq)) {
      return absl::InternalError(absl::StrFormat(
          "TpKvCache: rank %d's pages for sequence %d diverged from rank 0's", r, seq));
    }
  }
  return absl::OkStatus();
}

void TpKvCache::Release(int32_t seq) {
  for (auto& c : caches_) c->Release(seq);
}

}  // namespace loom
