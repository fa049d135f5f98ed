// Admission: the one authentication and limits step of the edge, called by every
// inference protocol before a request is validated and run.
//
//   * Authentication: with a keys file, the request's "Authorization: Bearer KEY" (HTTP
//     header or gRPC metadata) must name a key of it (Unauthenticated otherwise). Without
//     one, every request is the tenant "anonymous" (loomd then serves inference only on
//     loopback unless --allow_unauthenticated_inference).
//   * The adapter must be one the tenant's patterns allow (PermissionDenied).
//   * At most max_streams_per_tenant streams at once per tenant (ResourceExhausted).
//   * Token rate: a token bucket per tenant holding up to tokens_per_minute tokens and
//     refilled continuously at that rate; a request is admitted while the bucket is
//     positive, and its prompt + generated tokens are taken out when it ends (so the
//     last admitted request may overdraw it). An empty bucket: ResourceExhausted with a
//     retry delay (status_mapping.h RetryAfter) for when it is positive again.
//
// Keys are replaced whole by LoadKeys (SIGHUP); a tenant's counters survive a reload
// under the same tenant name. Thread-safe.
#ifndef LOOM_SERVER_TENANTS_ADMISSION_H_
#define LOOM_SERVER_TENANTS_ADMISSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/metrics/server_metrics.h"
#include "server/tenants/api_keys.h"

namespace loom {

inline constexpr char kAnonymousTenant[] = "anonymous";

struct AdmissionOptions {
  int max_streams_per_tenant = 0;  // 0 = unlimited
  // The clock of the token buckets (tests inject one).
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

class Admission;

// One admitted request. Holds its streams' slots until destroyed; Finish (at most once)
// takes its tokens from the tenant's bucket and counts it in the tenant's metrics.
// Movable, not copyable.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept { *this = std::move(other); }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  ~AdmissionTicket() { Release(); }

  void Finish(absl::StatusCode code, int64_t prompt_tokens, int64_t completion_tokens);
  const std::string& tenant() const;

 private:
  friend class Admission;
  struct TenantState;
  void Release();  // gives the streams back
  std::shared_ptr<TenantState> state_;
  ServerMetrics* metrics_ = nullptr;
  int streams_ = 0;
  bool finished_ = false;
};

class Admission {
 public:
  // `metrics` may be null; it must outlive the admission.
  explicit Admission(AdmissionOptions options, ServerMetrics* metrics = nullptr);

  // Replaces the keys with those of `path`; on error the keys in force stay and the
  // error says why (ApiKeys::Load's errors).
  absl::Status LoadKeys(const std::string& path);
  // Replaces the keys (tests, and LoadKeys).
  void SetKeys(ApiKeys keys);
  bool keys_required() const;

  // Only the authentication, for calls that generate nothing (Tokenize, model lists):
  // OK without keys; else Unauthenticated unless `authorization` names a key.
  absl::Status Authenticate(std::string_view authorization) const;

  // Admits a request for `streams` streams (OpenAI n) on `adapter_id` ("" = base).
  // `authorization`: the Authorization header's value ("Bearer KEY"), "" when absent.
  // Errors: Unauthenticated, PermissionDenied, ResourceExhausted (as above). Every
  // refusal is counted in the tenant metrics.
  absl::StatusOr<AdmissionTicket> Admit(std::string_view authorization,
                                        std::string_view adapter_id, int streams);

 private:
  using TenantState = AdmissionTicket::TenantState;
  // The tenant of `authorization` under keys_ (null: not a valid key).
  const TenantPolicy* FindLocked(std::string_view authorization) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<TenantState> StateFor(const TenantPolicy& policy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Refuse(const std::string& tenant, absl::Status status) const;

  const AdmissionOptions options_;
  ServerMetrics* const metrics_;

  mutable absl::Mutex mu_;
  std::unique_ptr<ApiKeys> keys_ ABSL_GUARDED_BY(mu_);  // null: no keys file
  absl::flat_hash_map<std::string, std::shared_ptr<TenantState>> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom

#endif  // LOOM_SERVER_TENANTS_ADMISSION_H_
