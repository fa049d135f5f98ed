// Per-tenant counters (tenants come from the API keys file, server/tenants):
//   loom_tenant_requests_total{tenant,code}      finished or refused inference requests
//   loom_tenant_prompt_tokens_total{tenant}      prompt tokens of finished requests
//   loom_tenant_generation_tokens_total{tenant}  tokens generated for them
// Bounded label cardinality like the adapter label: the first `max_tenant_labels`
// distinct tenants keep their name, any later one counts as "other". Thread-safe.
#ifndef LOOM_SERVER_METRICS_TENANT_METRICS_H_
#define LOOM_SERVER_METRICS_TENANT_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace loom {

class TenantMetrics {
 public:
  TenantMetrics(prometheus::Registry& registry, int max_tenant_labels);

  void RecordRequest(absl::string_view tenant, absl::StatusCode code);
  void RecordTokens(absl::string_view tenant, int64_t prompt_tokens, int64_t generated_tokens);
  // The label `tenant` counts under now.
  std::string Label(absl::string_view tenant);

 private:
  struct Series {
    std::string label;  // the tenant's name, or "other"
    prometheus::Counter* prompt = nullptr;
    prometheus::Counter* generated = nullptr;
    absl::flat_hash_map<int, prometheus::Counter*> requests;  // by code
  };
  Series& SeriesLocked(absl::string_view tenant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_labels_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* prompt_;
  prometheus::Family<prometheus::Counter>* generated_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Series> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom

#endif  // LOOM_SERVER_METRICS_TENANT_METRICS_H_
