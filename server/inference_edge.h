// InferenceEdge: what every inference protocol shares, in the single and the router role
// alike: the served model's tokenizer and chat template, the one admission (API keys,
// tenant limits: server/tenants/admission.h), the one validation (request_validation.h),
// the Frontend that runs requests, the model catalog, the metrics and the serving flag. loom.v1.Inference (inference_service.h) and the
// OpenAI HTTP API (server/openai) are thin protocol layers over it.
// Thread-safe; every pointer must outlive the edge.
#ifndef LOOM_SERVER_INFERENCE_EDGE_H_
#define LOOM_SERVER_INFERENCE_EDGE_H_

#include <atomic>

#include "absl/status/statusor.h"
#include "scheduler/frontend/frontend.h"
#include "server/metrics/server_metrics.h"
#include "server/model_catalog.h"
#include "server/request_validation.h"
#include "server/serving_model.h"
#include "server/tenants/admission.h"

namespace loom {

// A request that passed the edge: ready for the Frontend, holding its admission (the
// tenant's stream slots) until its streams end.
struct PreparedRequest {
  FrontendRequest request;
  int n = 1;  // OpenAI choices: run n streams of `request` (distinct seeds)
  AdmissionTicket ticket;
};

class InferenceEdge {
 public:
  struct Deps {
    const ServingModel* model = nullptr;  // tokenizer, chat template, name
    Frontend* frontend = nullptr;
    const ModelCatalog* catalog = nullptr;
    Admission* admission = nullptr;
    RequestLimits limits;                 // limits.max_context set from the model
    ServerMetrics* metrics = nullptr;     // may be null
    const std::atomic<bool>* serving = nullptr;  // false: new requests fail UNAVAILABLE
  };
  explicit InferenceEdge(Deps deps) : deps_(std::move(deps)) {}

  // The one admission and validation of every protocol: Unavailable while not serving;
  // then Admission::Admit's refusals (`authorization` is the Authorization header or
  // metadata value, "" when absent); then ValidateRequest's. A refusal after admission
  // is counted in the tenant's metrics.
  absl::StatusOr<PreparedRequest> Prepare(std::string_view authorization,
                                          const InferenceRequest& request) const;

  // For calls that generate nothing: Admission::Authenticate.
  absl::Status Authenticate(std::string_view authorization) const {
    return deps_.admission->Authenticate(authorization);
  }

  bool serving() const { return deps_.serving->load(std::memory_order_acquire); }
  const ServingModel& model() const { return *deps_.model; }
  Frontend* frontend() const { return deps_.frontend; }
  const ModelCatalog& catalog() const { return *deps_.catalog; }
  const RequestLimits& limits() const { return deps_.limits; }
  ServerMetrics* metrics() const { return deps_.metrics; }

 private:
  const Deps deps_;
};

}  // namespace loom

#endif  // LOOM_SERVER_INFERENCE_EDGE_H_
