#include "server/inference_edge.h"

namespace loom {

absl::StatusOr<FrontendRequest> InferenceEdge::Prepare(const InferenceRequest& request) const {
  if (!serving()) return absl::UnavailableError("server is shutting down");
  return ValidateRequest(request, *deps_.model, deps_.limits);
}

}  // namespace loom
