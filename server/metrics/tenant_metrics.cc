#include "server/metrics/tenant_metrics.h"

namespace loom {
namespace {
constexpr absl::string_view kOther = "other";
}  // namespace

TenantMetrics::TenantMetrics(prometheus::Registry& r, int max_tenant_labels)
    : max_labels_(max_tenant_labels),
      requests_(&prometheus::BuildCounter()
                     .Name("loom_tenant_requests_total")
                     .Help("Inference requests by tenant (API key's tenant; 'anonymous' "
                           "without keys) and status code, refusals included.")
                     .Register(r)),
      prompt_(&prometheus::BuildCounter()
                   .Name("loom_tenant_prompt_tokens_total")
                   .Help("Prompt tokens of finished requests by tenant.")
                   .Register(r)),
      generated_(&prometheus::BuildCounter()
                      .Name("loom_tenant_generation_tokens_total")
                      .Help("Tokens generated for finished requests by tenant.")
                      .Register(r)) {}

std::string TenantMetrics::Label(absl::string_view tenant) {
  absl::MutexLock l(&mu_);
  if (series_.contains(tenant)) return std::string(tenant);
  return static_cast<int>(series_.size()) < max_labels_ ? std::string(tenant)
                                                        : std::string(kOther);
}

TenantMetrics::Series& TenantMetrics::SeriesLocked(absl::string_view tenant) {
  auto it = series_.find(tenant);
  if (it != series_.end()) return it->second;
  const std::string label = static_cast<int>(series_.size()) < max_labels_ && tenant != kOther
                                ? std::string(tenant)
                                : std::string(kOther);
  auto [slot, inserted] = series_.try_emplace(label);
  if (inserted) {
    slot->second.label = label;
    slot->second.prompt = &prompt_->Add({{"tenant", label}});
    slot->second.generated = &generated_->Add({{"tenant", label}});
  }
  return slot->second;
}

void TenantMetrics::RecordRequest(absl::string_view tenant, absl::StatusCode code) {
  absl::MutexLock l(&mu_);
  Series& s = SeriesLocked(tenant);
  prometheus::Counter*& c = s.requests[static_cast<int>(code)];
  if (c == nullptr) {
    c = &requests_->Add({{"tenant", s.label}, {"code", absl::StatusCodeToString(code)}});
  }
  c->Increment();
}

void TenantMetrics::RecordTokens(absl::string_view tenant, int64_t prompt_tokens,
                                 int64_t generated_tokens) {
  absl::MutexLock l(&mu_);
  Series& s = SeriesLocked(tenant);
  if (prompt_tokens > 0) s.prompt->Increment(static_cast<double>(prompt_tokens));
  if (generated_tokens > 0) s.generated->Increment(static_cast<double>(generated_tokens));
}

}  // namespace loom
