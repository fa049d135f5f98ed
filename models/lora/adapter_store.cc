#include "models/lora/adapter_store.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "models/lora/adapter_loader.h"

namespace loom {

const char* AdapterStateName(AdapterState s) {
  switch (s) {
    case AdapterState::kLoading: return "LOADING";
    case AdapterState::kReady: return "READY";
    case AdapterState::kUnloading: return "UNLOADING";
    case AdapterState::kFailed: return "FAILED";
  }
  return "?";
}

namespace internal {

// One successfully loaded registration of an id. Every mutable field is guarded by the
// owning AdapterStoreCore::mu (a cross-object guard the annotations cannot name).
struct AdapterVersion {
  std::string id, source;
  uint64_t generation = 0;
  uint64_t fingerprint = 0;
  size_t bytes = 0;
  int rank = 0;
  std::vector<LoraTarget> targets;
  std::shared_ptr<const LoraAdapter> weights;  // null while evicted
  int leases = 0;
  bool reloading = false;  // a thread is reloading the weights from source
  bool retired = false;    // replaced or unloaded: freed when leases reach 0
  uint64_t lru_tick = 0;
};

struct AdapterEntry {
  AdapterState state = AdapterState::kLoading;
  std::string source, error;
  bool pinned = false;
  uint64_t reg_seq = 0;  // the Register call that owns a LOADING state
  std::shared_ptr<AdapterVersion> current;
  uint64_t requests_served = 0;
  absl::Time last_use = absl::InfinitePast();
};

class AdapterStoreCore : public std::enable_shared_from_this<AdapterStoreCore> {
 public:
  AdapterStoreCore(LlamaConfig base, AdapterStore::Options options, AdapterStore::Loader loader)
      : base_(std::move(base)), options_(options), loader_(std::move(loader)) {
    if (!loader_) {
      const LlamaConfig b = base_;
      const AdapterLimits limits{options_.max_rank};
      loader_ = [b, limits](const std::string& source) { return LoadAdapter(source, b, limits); };
    }
  }

  absl::Status Register(const std::string& id, const std::string& source, bool pin);
  absl::Status Unload(const std::string& id);
  absl::StatusOr<AdapterLease> Acquire(const std::string& id, bool count);
  absl::Status SetPinned(const std::string& id, bool pin);
  void Release(const std::shared_ptr<AdapterVersion>& v);
  std::vector<AdapterInfo> List() const;
  absl::StatusOr<AdapterInfo> Info(const std::string& id) const;
  size_t resident_bytes() const {
    absl::MutexLock l(&mu_);
    return resident_;
  }
  size_t budget_bytes() const { return options_.budget_bytes; }

 private:
  // Evicts idle unpinned current versions, least recently used first, until `need` more
  // bytes fit. False (nothing evicted beyond what helped) if impossible.
  bool MakeRoom(size_t need) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropWeights(AdapterVersion& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Retires `v`: frees now if idle, else keeps it in draining_ until its last lease.
  void Retire(const std::shared_ptr<AdapterVersion>& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AdapterInfo InfoLocked(const std::string& id, const AdapterEntry& e) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Fail(const std::string& id, uint64_t seq, absl::Status st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LlamaConfig base_;
  const AdapterStore::Options options_;
  AdapterStore::Loader loader_;

  mutable absl::Mutex mu_;
  std::map<std::string, AdapterEntry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<AdapterVersion>> draining_ ABSL_GUARDED_BY(mu_);
  size_t resident_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

void AdapterStoreCore::DropWeights(AdapterVersion& v) {
  if (v.weights != nullptr) {
    resident_ -= v.bytes;
    v.weights.reset();
  }
}

bool AdapterStoreCore::MakeRoom(size_t need) {
  if (need > options_.budget_bytes) return false;
  while (resident_ + need > options_.budget_bytes) {
    AdapterVersion* victim = nullptr;
    for (auto& [id, e] : entries_) {
      AdapterVersion* v = e.current.get();
      if (v == nullptr || v->weights == nullptr || v->leases > 0 || v->reloading ||
          v->retired || e.pinned) {
        continue;
      }
      if (victim == nullptr || v->lru_tick < victim->lru_tick) victim = v;
    }
    if (victim == nullptr) return false;
    DropWeights(*victim);
  }
  return true;
}

void AdapterStoreCore::Retire(const std::shared_ptr<AdapterVersion>& v) {
  v->retired = true;
  if (v->leases == 0) {
    DropWeights(*v);
  } else {
    draining_.push_back(v);
  }
}

absl::Status AdapterStoreCore::Fail(const std::string& id, uint64_t seq, absl::Status st) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.reg_seq != seq) return st;
  AdapterEntry& e = it->second;
  e.error = std::string(st.message());
  e.state = e.current != nullptr ? AdapterState::kReady : AdapterState::kFailed;
  return st;
}

absl::Status AdapterStoreCore::Register(const std::string& id, const std::string& source,
                                        bool pin) {
  uint64_t seq;
  {
    absl::MutexLock l(&mu_);
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.state == AdapterState::kLoading) {
      return absl::FailedPreconditionError(
          absl::StrFormat("adapter '%s' is already loading", id));
    }
    AdapterEntry& e = entries_[id];
    if (e.state == AdapterState::kUnloading) e.current = nullptr;  // stays in draining_
    e.state = AdapterState::kLoading;
    e.source = source;
    e.error.clear();
    seq = e.reg_seq = ++next_seq_;
  }
  // I/O and conversion without the lock.
  absl::StatusOr<std::unique_ptr<LoraAdapter>> loaded = loader_(source);

  absl::MutexLock l(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.reg_seq != seq) {
    return absl::AbortedError(absl::StrFormat(
        "adapter '%s' was unloaded or registered again while this load ran", id));
  }
  AdapterEntry& e = it->second;
  if (!loaded.ok()) return Fail(id, seq, loaded.status());
  const size_t bytes = (*loaded)->bytes();
  if (bytes > options_.budget_bytes) {
    return Fail(id, seq, absl::ResourceExhaustedError(absl::StrFormat(
                             "adapter '%s' (%s) needs %d bytes, more than the whole adapter "
                             "budget of %d bytes",
                             id, source, bytes, options_.budget_bytes)));
  }
  std::shared_ptr<AdapterVersion> old = e.current;
  if (old != nullptr && old->leases == 0 && !old->reloading) DropWeights(*old);
  const bool room = MakeRoom(bytes);
  if (!room && pin) {
    return Fail(id, seq, absl::ResourceExhaustedError(absl::StrFormat(
                             "cannot pin adapter '%s': %d bytes do not fit the budget of %d "
                             "bytes (%d held by adapters in use or pinned)",
                             id, bytes, options_.budget_bytes, resident_)));
  }
  auto v = std::make_shared<AdapterVersion>();
  v->id = id;
  v->source = source;
  v->generation = ++next_generation_;
  v->fingerprint = (*loaded)->Fingerprint();
  v->bytes = bytes;
  v->rank = (*loaded)->max_rank();
  v->targets = (*loaded)->targets();
  v->lru_tick = ++tick_;
  if (room) {
    (*loaded)->set_id(id);
    v->weights = std::shared_ptr<const LoraAdapter>(*std::move(loaded));
    resident_ += bytes;
  }
  if (old != nullptr) Retire(old);
  e.current = std::move(v);
  e.state = AdapterState::kReady;
  e.pinned = pin;
  return absl::OkStatus();
}

absl::Status AdapterStoreCore::Unload(const std::string& id) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.state == AdapterState::kUnloading) {
    return absl::NotFoundError(absl::StrFormat("adapter '%s' is not registered", id));
  }
  AdapterEntry& e = it->second;
  std::shared_ptr<AdapterVersion> v = e.current;
  if (v == nullptr || v->leases == 0) {  // a reload in flight sees `retired` and stops
    if (v != nullptr) Retire(v);
    entries_.erase(it);  // a load in flight sees its reg_seq gone and discards its result
    return absl::OkStatus();
  }
  Retire(v);
  e.state = AdapterState::kUnloading;
  e.reg_seq = ++next_seq_;
  return absl::OkStatus();
}

absl::StatusOr<AdapterLease> AdapterStoreCore::Acquire(const std::string& id, bool count) {
  absl::MutexLock l(&mu_);
  for (;;) {
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrFormat("adapter '%s' is not registered", id));
    }
    AdapterEntry& e = it->second;
    if (e.state == AdapterState::kUnloading) {
      return absl::NotFoundError(absl::StrFormat("adapter '%s' is being unloaded", id));
    }
    std::shared_ptr<AdapterVersion> v = e.current;
    if (v == nullptr) {
      if (e.state == AdapterState::kLoading) {
        return absl::UnavailableError(absl::StrFormat("adapter '%s' is still loading", id));
      }
      return absl::FailedPreconditionError(
          absl::StrFormat("adapter '%s' failed to load: %s", id, e.error));
    }
    if (v->reloading) {
      AdapterVersion* raw = v.get();
      mu_.Await(absl::Condition(
          +[](AdapterVersion* x) { return !x->reloading; }, raw));
      continue;
    }
    if (v->weights != nullptr) {
      AdapterLease lease;
      ++v->leases;
      v->lru_tick = ++tick_;
      if (count) {
        ++e.requests_served;
        e.last_use = absl::Now();
      }
      lease.core_ = shared_from_this();
      lease.version_ = v;
      lease.adapter_ = v->weights;
      lease.generation_ = v->generation;
      return lease;
    }
    // Evicted: reload from source, with room reserved first.
    if (!MakeRoom(v->bytes)) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "adapter '%s' needs %d bytes to reload; the budget of %d bytes is held by adapters "
          "in use or pinned (%d bytes resident)",
          id, v->bytes, options_.budget_bytes, resident_));
    }
    resident_ += v->bytes;  // reserved
    v->reloading = true;
    const std::string source = v->source;
    mu_.Unlock();
    absl::StatusOr<std::unique_ptr<LoraAdapter>> loaded = loader_(source);
    mu_.Lock();
    v->reloading = false;
    resident_ -= v->bytes;  // the reservation; re-added below if installed
    if (!loaded.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "adapter '%s': reloading evicted weights from %s failed: %s", id, source,
          loaded.status().message()));
    }
    if ((*loaded)->Fingerprint() != v->fingerprint) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "adapter '%s': %s changed since it was registered; register it again", id, source));
    }
    if (v->retired) continue;  // unloaded or replaced meanwhile: look again
    (*loaded)->set_id(id);
    v->weights = std::shared_ptr<const LoraAdapter>(*std::move(loaded));
    resident_ += v->bytes;
  }
}

absl::Status AdapterStoreCore::SetPinned(const std::string& id, bool pin) {
  {
    absl::MutexLock l(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.state == AdapterState::kUnloading) {
      return absl::NotFoundError(absl::StrFormat("adapter '%s' is not registered", id));
    }
    if (it->second.current == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrFormat("adapter '%s' has no loaded version to pin", id));
    }
    it->second.pinned = pin;
    if (!pin || it->second.current->weights != nullptr) return absl::OkStatus();
  }
  // Pinned but evicted: make it resident now.
  absl::StatusOr<AdapterLease> lease = Acquire(id, /*count=*/false);
  if (!lease.ok()) {
    absl::MutexLock l(&mu_);
    if (auto it = entries_.find(id); it != entries_.end()) it->second.pinned = false;
    return lease.status();
  }
  return absl::OkStatus();
}

void AdapterStoreCore::Release(const std::shared_ptr<AdapterVersion>& v) {
  absl::MutexLock l(&mu_);
  if (--v->leases > 0 || !v->retired) return;
  DropWeights(*v);
  draining_.erase(std::remove(draining_.begin(), draining_.end(), v), draining_.end());
  auto it = entries_.find(v->id);
  if (it != entries_.end() && it->second.state == AdapterState::kUnloading &&
      it->second.current == v) {
    entries_.erase(it);
  }
}

AdapterInfo AdapterStoreCore::InfoLocked(const std::string& id, const AdapterEntry& e) const {
  AdapterInfo info;
  info.id = id;
  info.source = e.source;
  info.state = e.state;
  info.error = e.error;
  info.pinned = e.pinned;
  info.requests_served = e.requests_served;
  info.last_use = e.last_use;
  if (const AdapterVersion* v = e.current.get()) {
    info.source = v->source;
    info.rank = v->rank;
    info.targets = v->targets;
    info.bytes = v->bytes;
    info.resident = v->weights != nullptr;
    info.active_leases = v->leases;
    info.generation = v->generation;
  }
  return info;
}

std::vector<AdapterInfo> AdapterStoreCore::List() const {
  absl::MutexLock l(&mu_);
  std::vector<AdapterInfo> out;
  for (const auto& [id, e] : entries_) out.push_back(InfoLocked(id, e));
  return out;
}

absl::StatusOr<AdapterInfo> AdapterStoreCore::Info(const std::string& id) const {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrFormat("adapter '%s' is not registered", id));
  }
  return InfoLocked(id, it->second);
}

}  // namespace internal

AdapterLease::AdapterLease(AdapterLease&& o) noexcept
    : core_(std::move(o.core_)),
      version_(std::move(o.version_)),
      adapter_(std::move(o.adapter_)),
      generation_(o.generation_) {}

AdapterLease& AdapterLease::operator=(AdapterLease&& o) noexcept {
  if (this != &o) {
    Reset();
    core_ = std::move(o.core_);
    version_ = std::move(o.version_);
    adapter_ = std::move(o.adapter_);
    generation_ = o.generation_;
  }
  return *this;
}

void AdapterLease::Reset() {
  if (core_ != nullptr && version_ != nullptr) core_->Release(version_);
  adapter_.reset();
  version_.reset();
  core_.reset();
}

AdapterStore::AdapterStore(const LlamaConfig& base, Options options, Loader loader)
    : core_(std::make_shared<internal::AdapterStoreCore>(base, options, std::move(loader))) {}
AdapterStore::~AdapterStore() = default;

absl::Status AdapterStore::Register(const std::string& id, const std::string& source,
                                    bool pin) {
  return core_->Register(id, source, pin);
}
absl::Status AdapterStore::Unload(const std::string& id) { return core_->Unload(id); }
absl::StatusOr<AdapterLease> AdapterStore::Acquire(const std::string& id) {
  return core_->Acquire(id, /*count=*/true);
}
absl::Status AdapterStore::Pin(const std::string& id) { return core_->SetPinned(id, true); }
absl::Status AdapterStore::Unpin(const std::string& id) { return core_->SetPinned(id, false); }
std::vector<AdapterInfo> AdapterStore::List() const { return core_->List(); }
absl::StatusOr<AdapterInfo> AdapterStore::Info(const std::string& id) const {
  return core_->Info(id);
}
size_t AdapterStore::resident_bytes() const { return core_->resident_bytes(); }
size_t AdapterStore::budget_bytes() const { return core_->budget_bytes(); }

}  // namespace loom
