// AdapterStore: the adapters a server knows, by id, with explicit states, a host-memory
// budget in BYTES, LRU eviction of idle unpinned adapters' weights, pinning, and leases
// that keep weights alive while sequences use them.
//
//   Register(id, source, pin)  LOADING -> READY, or FAILED with the reason (List shows it).
//                              Loads on the CALLER's thread (the serving layer calls it from
//                              its loader pool; the store's lock is not held during I/O).
//                              Registering an existing id again REPLACES it for new
//                              acquirers only: leases on the old weights keep them (and
//                              their bytes count) until released; if the new load fails
//                              the old version keeps serving.
//   Acquire(id)                A lease on the current weights (requests_served += 1). If
//                              they were evicted they are reloaded from source on this
//                              thread (evicting LRU idle unpinned others first;
//                              ResourceExhausted if the budget cannot be met) and checked
//                              to be identical to what was registered.
//   Unload(id)                 UNLOADING until every lease is released, then removed. New
//                              Acquire calls fail NotFound at once; existing leases stay
//                              valid.
//   Pin / Unpin                A pinned adapter is made resident and never evicted.
// Eviction drops only weights: the adapter stays registered (READY, resident = false). Only
// an id never registered, or unloaded, is unknown (NotFound). Weights with a lease are
// never freed. Thread-safe; leases may outlive the store.
#ifndef LOOM_MODELS_LORA_ADAPTER_STORE_H_
#define LOOM_MODELS_LORA_ADAPTER_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "models/lora/lora_adapter.h"
#include "models/model_config.h"

namespace loom {

enum class AdapterState { kLoading, kReady, kUnloading, kFailed };
const char* AdapterStateName(AdapterState s);  // "LOADING", "READY", ...

struct AdapterInfo {
  std::string id;
  std::string source;
  AdapterState state = AdapterState::kLoading;
  std::string error;             // why the last load failed (FAILED, or a failed reload)
  int rank = 0;                  // largest rank of the current version
  std::vector<LoraTarget> targets;
  size_t bytes = 0;              // weight bytes of the current version (resident or not)
  bool pinned = false;
  bool resident = false;         // weights in memory now
  int active_leases = 0;         // on the current version
  uint64_t requests_served = 0;  // successful Acquire calls
  absl::Time last_use = absl::InfinitePast();
  uint64_t generation = 0;       // store-wide counter of successful registrations
};

namespace internal {
class AdapterStoreCore;
struct AdapterVersion;
}  // namespace internal

// Keeps one adapter version's weights alive; move-only; releases on destruction.
class AdapterLease {
 public:
  AdapterLease() = default;
  AdapterLease(AdapterLease&& o) noexcept;
  AdapterLease& operator=(AdapterLease&& o) noexcept;
  AdapterLease(const AdapterLease&) = delete;
  AdapterLease& operator=(const AdapterLease&) = delete;
  ~AdapterLease() { Reset(); }

  const LoraAdapter* get() const { return adapter_.get(); }
  const LoraAdapter& operator*() const { return *adapter_; }
  const LoraAdapter* operator->() const { return adapter_.get(); }
  explicit operator bool() const { return adapter_ != nullptr; }
  uint64_t generation() const { return generation_; }
  // Releases the lease now (idempotent).
  void Reset();

 private:
  friend class internal::AdapterStoreCore;
  std::shared_ptr<internal::AdapterStoreCore> core_;
  std::shared_ptr<internal::AdapterVersion> version_;
  std::shared_ptr<const LoraAdapter> adapter_;
  uint64_t generation_ = 0;
};

class AdapterStore {
 public:
  struct Options {
    size_t budget_bytes = size_t{1} << 30;  // host memory for adapter weights
    int max_rank = 256;                     // adapters above it are refused at load
  };
  // Loads an adapter from a source path (default: LoadAdapter against the base config).
  using Loader =
      std::function<absl::StatusOr<std::unique_ptr<LoraAdapter>>(const std::string& source)>;

  AdapterStore(const LlamaConfig& base, Options options, Loader loader = nullptr);
  ~AdapterStore();
  AdapterStore(const AdapterStore&) = delete;
  AdapterStore& operator=(const AdapterStore&) = delete;

  // The load's Status on failure (the id is then FAILED, or keeps its previous version
  // when it was a replacement). ResourceExhausted if the adapter is larger than the whole
  // budget, or if `pin` and room cannot be made. FailedPrecondition if the id is already
  // LOADING; Aborted if the id was unloaded or re-registered while this load ran.
  absl::Status Register(const std::string& id, const std::string& source, bool pin = false);
  // NotFound if unknown or already unloading.
  absl::Status Unload(const std::string& id);
  // NotFound (unknown or unloading), Unavailable (first load still running),
  // FailedPrecondition (FAILED: the reason; or a reload from source failed or gave
  // different weights), ResourceExhausted (evicted and no room to reload).
  absl::StatusOr<AdapterLease> Acquire(const std::string& id);
  absl::Status Pin(const std::string& id);
  absl::Status Unpin(const std::string& id);

  std::vector<AdapterInfo> List() const;  // sorted by id
  absl::StatusOr<AdapterInfo> Info(const std::string& id) const;
  // Bytes of weights held now (current, replaced and unloading versions with leases, and
  // reloads in flight).
  size_t resident_bytes() const;
  size_t budget_bytes() const;

 private:
  std::shared_ptr<internal::AdapterStoreCore> core_;
};

}  // namespace loom

#endif  // LOOM_MODELS_LORA_ADAPTER_STORE_H_
