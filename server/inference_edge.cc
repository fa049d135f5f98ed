#include "server/inference_edge.h"

#include <algorithm>

namespace loom {

absl::StatusOr<PreparedRequest> InferenceEdge::Prepare(std::string_view authorization,
                                                       const InferenceRequest& request) const {
  if (!serving()) return absl::UnavailableError("server is shutting down");
  const int n = static_cast<int>(std::clamp<int64_t>(request.n, 1, deps_.limits.max_n));
  absl::StatusOr<AdmissionTicket> ticket =
      deps_.admission->Admit(authorization, request.adapter_id, n);
  if (!ticket.ok()) return ticket.status();
  absl::StatusOr<FrontendRequest> valid = ValidateRequest(request, *deps_.model, deps_.limits);
  if (!valid.ok()) {
    ticket->Finish(valid.status().code(), 0, 0);
    return valid.status();
  }
  return PreparedRequest{*std::move(valid), n, *std::move(ticket)};
}

}  // namespace loom
