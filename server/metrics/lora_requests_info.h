// loom_lora_requests_info: the gauge an inference gateway (the Kubernetes Gateway API
// Inference Extension) reads to route by adapter affinity, in the shape vLLM exports as
// vllm:lora_requests_info: ONE series whose labels carry the state and whose value is
// the Unix time of the update.
//   running_lora_adapters   comma-separated adapter ids with a running request
//   waiting_lora_adapters   comma-separated adapter ids with a waiting request
//   max_lora                how many distinct adapters one batch can hold (Loom has no
//                           separate cap: the running-batch size)
// Thread-safe.
#ifndef LOOM_SERVER_METRICS_LORA_REQUESTS_INFO_H_
#define LOOM_SERVER_METRICS_LORA_REQUESTS_INFO_H_

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace loom {

class LoraRequestsInfo {
 public:
  explicit LoraRequestsInfo(prometheus::Registry& registry);

  // Replaces the series when the labels change; the value is `now` as Unix seconds.
  void Set(const std::vector<std::string>& running, const std::vector<std::string>& waiting,
           int max_lora, absl::Time now = absl::Now());

 private:
  prometheus::Family<prometheus::Gauge>* family_;
  absl::Mutex mu_;
  prometheus::Gauge* gauge_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom

#endif  // LOOM_SERVER_METRICS_LORA_REQUESTS_INFO_H_
