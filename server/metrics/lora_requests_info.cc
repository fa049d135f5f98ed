#include "server/metrics/lora_requests_info.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom {

LoraRequestsInfo::LoraRequestsInfo(prometheus::Registry& r)
    : family_(&prometheus::BuildGauge()
                   .Name("loom_lora_requests_info")
                   .Help("Running and waiting LoRA adapters (labels, comma-separated) and "
                         "the adapters one batch can hold; value: Unix time of the update. "
                         "The shape of vllm:lora_requests_info.")
                   .Register(r)) {}

void LoraRequestsInfo::Set(const std::vector<std::string>& running,
                           const std::vector<std::string>& waiting, int max_lora,
                           absl::Time now) {
  const std::string run = absl::StrJoin(running, ",");
  const std::string wait = absl::StrJoin(waiting, ",");
  const std::string max = absl::StrCat(max_lora);
  const std::string key = absl::StrCat(run, "|", wait, "|", max);
  absl::MutexLock l(&mu_);
  if (gauge_ == nullptr || key != key_) {
    if (gauge_ != nullptr) family_->Remove(gauge_);
    gauge_ = &family_->Add({{"running_lora_adapters", run},
                            {"waiting_lora_adapters", wait},
                            {"max_lora", max}});
    key_ = key;
  }
  gauge_->Set(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
}

}  // namespace loom
