#include "scheduler/cluster/worker_request_checks.h"

#include "absl/strings/str_format.h"

namespace loom {

absl::Status CheckWorkerRequest(const WorkerRequest& request) {
  if (request.context.empty()) return absl::InvalidArgumentError("context is empty");
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_new_tokens = %d must be >= 1", request.max_new_tokens));
  }
  if (request.generated_before < 0 ||
      request.generated_before >= static_cast<int64_t>(request.context.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "generated_before = %d must be in [0, %d) (the context's length)",
        request.generated_before, request.context.size()));
  }
  if (request.top_logprobs < 0 || request.top_logprobs > 20) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_logprobs = %d must be in [0, 20]", request.top_logprobs));
  }
  return absl::OkStatus();
}

}  // namespace loom
