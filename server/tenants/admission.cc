#include "server/tenants/admission.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "server/status_mapping.h"

namespace loom {
namespace {
constexpr char kUnauthenticatedTenant[] = "unauthenticated";
}  // namespace

// One tenant's live counters, shared by its tickets; survives key reloads by name.
struct AdmissionTicket::TenantState {
  const std::string name;
  const std::function<absl::Time()> now;

  absl::Mutex mu;
  int64_t tokens_per_minute ABSL_GUARDED_BY(mu) = 0;  // 0 = unlimited
  double bucket ABSL_GUARDED_BY(mu) = 0;              // tokens available
  absl::Time refilled ABSL_GUARDED_BY(mu);
  int streams ABSL_GUARDED_BY(mu) = 0;

  TenantState(std::string n, std::function<absl::Time()> clock)
      : name(std::move(n)), now(std::move(clock)), refilled(now()) {}

  void SetRate(int64_t tpm) {
    absl::MutexLock l(&mu);
    if (tpm != tokens_per_minute) bucket = static_cast<double>(tpm);  // a new limit: full
    tokens_per_minute = tpm;
  }
  void RefillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const absl::Time t = now();
    const double per_second = static_cast<double>(tokens_per_minute) / 60.0;
    bucket = std::min<double>(static_cast<double>(tokens_per_minute),
                              bucket + per_second * absl::ToDoubleSeconds(t - refilled));
    refilled = t;
  }
};

void AdmissionTicket::Release() {
  if (state_ == nullptr) return;
  {
    absl::MutexLock l(&state_->mu);
    state_->streams -= streams_;
  }
  state_.reset();
}

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this == &other) return *this;
  Release();
  state_ = std::move(other.state_);
  metrics_ = other.metrics_;
  streams_ = other.streams_;
  finished_ = other.finished_;
  other.state_.reset();
  return *this;
}

const std::string& AdmissionTicket::tenant() const {
  static const std::string* const none = new std::string();
  return state_ == nullptr ? *none : state_->name;
}

void AdmissionTicket::Finish(absl::StatusCode code, int64_t prompt_tokens,
                             int64_t completion_tokens) {
  if (state_ == nullptr || finished_) return;
  finished_ = true;
  {
    absl::MutexLock l(&state_->mu);
    if (state_->tokens_per_minute > 0) {
      state_->RefillLocked();
      state_->bucket -= static_cast<double>(prompt_tokens + completion_tokens);
    }
  }
  if (metrics_ != nullptr) {
    metrics_->tenants()->RecordRequest(state_->name, code);
    metrics_->tenants()->RecordTokens(state_->name, prompt_tokens, completion_tokens);
  }
}

Admission::Admission(AdmissionOptions options, ServerMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {}

absl::Status Admission::LoadKeys(const std::string& path) {
  absl::StatusOr<ApiKeys> keys = ApiKeys::Load(path);
  if (!keys.ok()) return keys.status();
  SetKeys(*std::move(keys));
  return absl::OkStatus();
}

void Admission::SetKeys(ApiKeys keys) {
  absl::MutexLock l(&mu_);
  keys_ = std::make_unique<ApiKeys>(std::move(keys));
  for (const TenantPolicy& p : keys_->tenants()) StateFor(p)->SetRate(p.tokens_per_minute);
}

bool Admission::keys_required() const {
  absl::MutexLock l(&mu_);
  return keys_ != nullptr;
}

std::shared_ptr<AdmissionTicket::TenantState> Admission::StateFor(const TenantPolicy& policy) {
  std::shared_ptr<TenantState>& s = tenants_[policy.name];
  if (s == nullptr) {
    s = std::make_shared<TenantState>(policy.name, options_.now);
    s->SetRate(policy.tokens_per_minute);
  }
  return s;
}

absl::Status Admission::Refuse(const std::string& tenant, absl::Status status) const {
  if (metrics_ != nullptr) metrics_->tenants()->RecordRequest(tenant, status.code());
  return status;
}

const TenantPolicy* Admission::FindLocked(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return nullptr;
  return keys_->Find(authorization.substr(kBearer.size()));
}

absl::Status Admission::Authenticate(std::string_view authorization) const {
  absl::MutexLock l(&mu_);
  if (keys_ == nullptr || FindLocked(authorization) != nullptr) return absl::OkStatus();
  return absl::UnauthenticatedError("a valid API key is required (Authorization: Bearer KEY)");
}

absl::StatusOr<AdmissionTicket> Admission::Admit(std::string_view authorization,
                                                 std::string_view adapter_id, int streams) {
  std::shared_ptr<TenantState> state;
  bool allowed = true;
  {
    absl::MutexLock l(&mu_);
    if (keys_ == nullptr) {
      state = StateFor(TenantPolicy{kAnonymousTenant, {}, 0});
    } else {
      const TenantPolicy* p = FindLocked(authorization);
      if (p == nullptr) {
        return Refuse(kUnauthenticatedTenant,
                      absl::UnauthenticatedError(
                          authorization.empty()
                              ? "an API key is required (Authorization: Bearer KEY)"
                              : "the API key is not valid"));
      }
      state = StateFor(*p);
      allowed = p->AllowsAdapter(adapter_id);
    }
  }
  if (!allowed) {
    return Refuse(state->name,
                  absl::PermissionDeniedError(absl::StrFormat(
                      "tenant '%s' may not use adapter '%s'", state->name, adapter_id)));
  }
  {
    absl::MutexLock l(&state->mu);
    if (options_.max_streams_per_tenant > 0 &&
        state->streams + streams > options_.max_streams_per_tenant) {
      return Refuse(state->name, absl::ResourceExhaustedError(absl::StrFormat(
                                     "tenant '%s' has %d streams open; at most %d allowed",
                                     state->name, state->streams,
                                     options_.max_streams_per_tenant)));
    }
    if (state->tokens_per_minute > 0) {
      state->RefillLocked();
      if (state->bucket <= 0) {
        const double per_second = static_cast<double>(state->tokens_per_minute) / 60.0;
        const double wait = std::max(1.0, std::ceil((1.0 - state->bucket) / per_second));
        return Refuse(state->name,
                      WithRetryAfter(absl::ResourceExhaustedError(absl::StrFormat(
                                         "tenant '%s' is over its limit of %d tokens per "
                                         "minute; retry after %d s",
                                         state->name, state->tokens_per_minute,
                                         static_cast<int64_t>(wait))),
                                     absl::Seconds(wait)));
      }
    }
    state->streams += streams;
  }
  AdmissionTicket ticket;
  ticket.state_ = std::move(state);
  ticket.metrics_ = metrics_;
  ticket.streams_ = streams;
  return ticket;
}

}  // namespace loom
