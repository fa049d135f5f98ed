#include "server/adapter_manager.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace loom {

AdapterManager::AdapterManager(AdapterStore* store, AdapterRoots roots, Options options,
                               ServerMetrics* metrics)
    : store_(store), roots_(std::move(roots)), options_(options), metrics_(metrics) {}

int AdapterManager::on_demand_loads_in_flight() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(on_demand_ids_.size());
}

AdapterManager::~AdapterManager() { loader_.Stop(); }

void AdapterManager::PublishStates() {
  if (metrics_ != nullptr) metrics_->SetAdapterStates(store_->List());
}

absl::StatusOr<AdapterInfo> AdapterManager::Load(const std::string& id,
                                                 const std::string& source, bool pin) {
  if (absl::Status s = ValidateAdapterId(id); !s.ok()) return s;
  absl::StatusOr<std::string> path = roots_.Resolve(source);
  if (!path.ok()) return path.status();
  const absl::Time start = absl::Now();
  absl::Status s = store_->Register(id, *path, pin);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (metrics_ != nullptr) metrics_->ObserveAdapterLoad(seconds, s.ok());
  PublishStates();
  if (!s.ok()) {
    spdlog::warn("event=adapter_load_failed id={} source={} code={} error=\"{}\"", id, *path,
                 absl::StatusCodeToString(s.code()), std::string(s.message()));
    // A malformed adapter (or one that does not fit the base model) is a precondition
    // failure of the request; other codes (NotFound, ResourceExhausted, ...) pass through.
    const absl::StatusCode code = s.code() == absl::StatusCode::kInvalidArgument
                                      ? absl::StatusCode::kFailedPrecondition
                                      : s.code();
    return absl::Status(code, absl::StrFormat("adapter '%s' from '%s' cannot be loaded: %s",
                                              id, *path, s.message()));
  }
  spdlog::info("event=adapter_loaded id={} source={} pin={} seconds={:.3f}", id, *path, pin,
               seconds);
  return store_->Info(id);
}

void AdapterManager::LoadAsync(const std::string& id, const std::string& source, bool pin,
                               std::function<void(absl::StatusOr<AdapterInfo>)> done) {
  loader_.Post([this, id, source, pin, done = std::move(done)] {
    done(Load(id, source, pin));
  });
}

void AdapterManager::EnsureKnownAsync(const std::string& id,
                                      std::function<void(absl::Status)> done) {
  absl::StatusOr<AdapterInfo> info = store_->Info(id);
  if (info.ok() && info->state == AdapterState::kLoading) {
    // Another request's on-demand load (queued earlier on the loader thread, so finished
    // when this task runs) or an Admin load on its caller's thread: wait for its outcome
    // instead of submitting a request the engine would refuse as "still loading".
    loader_.Post([this, id, done = std::move(done)] { done(AwaitLoad(id)); });
    return;
  }
  if (info.ok() && info->state != AdapterState::kUnloading) return done(absl::OkStatus());
  if (info.ok() || !options_.on_demand) {
    return done(absl::NotFoundError(absl::StrFormat("adapter '%s' not found", id)));
  }
  absl::StatusOr<std::string> path = roots_.FindById(id);
  if (!path.ok()) {
    if (path.status().code() == absl::StatusCode::kInvalidArgument) {
      return done(absl::NotFoundError(absl::StrFormat("adapter '%s' not found", id)));
    }
    return done(path.status());
  }
  {
    absl::MutexLock l(&mu_);
    if (on_demand_ids_.count(id) != 0) {
      // Its load is queued ahead of this task (the loader runs tasks in order): by the
      // time this runs, the load has ended and AwaitLoad only reads its outcome.
      loader_.Post([this, id, done = std::move(done)] { done(AwaitLoad(id)); });
      return;
    }
    if (static_cast<int>(on_demand_ids_.size()) >= options_.max_on_demand_loads) {
      spdlog::warn("event=adapter_on_demand_refused id={} in_flight={}", id,
                   on_demand_ids_.size());
      return done(absl::ResourceExhaustedError(absl::StrFormat(
          "adapter '%s' is not loaded and %d on-demand adapter loads are already queued or "
          "running (max_on_demand_loads); retry later",
          id, options_.max_on_demand_loads)));
    }
    on_demand_ids_.insert(id);
  }
  loader_.Post([this, id, path = *path, done = std::move(done)] {
    absl::Status status;
    // Another request may have loaded it while this one waited in the queue.
    absl::StatusOr<AdapterInfo> again = store_->Info(id);
    if (again.ok() && again->state == AdapterState::kReady) {
      status = absl::OkStatus();
    } else {
      spdlog::info("event=adapter_on_demand id={} source={}", id, path);
      status = Load(id, path, /*pin=*/false).status();
    }
    {
      absl::MutexLock l(&mu_);
      on_demand_ids_.erase(id);
    }
    done(status);
  });
}

absl::Status AdapterManager::AwaitLoad(const std::string& id) {
  const absl::Time until = absl::Now() + kLoadWait;
  absl::StatusOr<AdapterInfo> info = store_->Info(id);
  while (info.ok() && info->state == AdapterState::kLoading && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
    info = store_->Info(id);
  }
  if (!info.ok() || info->state == AdapterState::kUnloading) {
    return absl::NotFoundError(absl::StrFormat("adapter '%s' not found", id));
  }
  if (info->state == AdapterState::kFailed) {
    return absl::FailedPreconditionError(
        absl::StrFormat("adapter '%s' failed to load: %s", id, info->error));
  }
  if (info->state == AdapterState::kLoading) {
    return absl::UnavailableError(absl::StrFormat(
        "adapter '%s' is still loading after %s", id, absl::FormatDuration(kLoadWait)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> AdapterManager::Unload(const std::string& id) {
  absl::StatusOr<AdapterInfo> info = store_->Info(id);
  if (!info.ok() || info->state == AdapterState::kUnloading) {
    return absl::NotFoundError(absl::StrFormat("adapter '%s' not found", id));
  }
  if (absl::Status s = store_->Unload(id); !s.ok()) return s;
  absl::StatusOr<AdapterInfo> after = store_->Info(id);
  const int draining = after.ok() ? after->active_leases : 0;
  spdlog::info("event=adapter_unloaded id={} draining_requests={}", id, draining);
  PublishStates();
  return draining;
}

}  // namespace loom
