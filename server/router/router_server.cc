#include "server/router/router_server.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "scheduler/cluster/cluster_frontend.h"
#include "server/bearer_auth.h"
#include "server/daemon_support.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "server/router/admin_fanout.h"
#include "server/router/router_metrics.h"
#include "server/router/router_model.h"
#include "server/router/cluster_adapter_admin.h"
#include "server/router/router_services.h"
#include "server/inference_edge.h"
#include "server/inference_service.h"
#include "server/model_catalog.h"
#include "server/router/worker_addresses.h"
#include "spdlog/spdlog.h"

namespace loom {

absl::Status RouterSettings::Validate() const {
  if (absl::StatusOr<std::vector<WorkerSpecItem>> items = ParseWorkerSpec(workers);
      !items.ok()) {
    return items.status();
  }
  if (placement != "punica" && placement != "round_robin" && placement != "least_loaded") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "placement: '%s' is not punica, round_robin or least_loaded", placement));
  }
  if (max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_batch_size: %d must be >= 1", max_batch_size));
  }
  if (worker_admin_port < 0 || worker_admin_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("worker_admin_port: %d is outside [0, 65535]", worker_admin_port));
  }
  if (resolve_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("resolve_interval must be > 0");
  }
  return absl::OkStatus();
}

namespace {

// Adds a worker for every resolved address not known yet.
void AddNewWorkers(const std::vector<WorkerSpecItem>& items, const WorkerFactory& factory,
                   ClusterFrontend* frontend) {
  absl::StatusOr<std::vector<std::string>> addrs = ResolveWorkers(items);
  if (!addrs.ok()) {
    spdlog::warn("event=resolve_failed error=\"{}\"", std::string(addrs.status().message()));
    return;
  }
  for (const std::string& a : *addrs) {
    if (frontend->HasWorker(a)) continue;
    absl::StatusOr<std::unique_ptr<Worker>> w = factory(a);
    if (!w.ok()) {
      spdlog::warn("event=worker_create_failed worker={} error=\"{}\"", a,
                   std::string(w.status().message()));
      continue;
    }
    if (absl::Status s = frontend->AddWorker(*std::move(w)); s.ok()) {
      spdlog::info("event=worker_added worker={}", a);
    }
  }
}

}  // namespace

absl::Status ServeRouter(const ServerOptions& o, const RouterSettings& r,
                         const WorkerFactory& factory) {
  if (absl::Status s = r.Validate(); !s.ok()) return s;
  absl::StatusOr<std::vector<WorkerSpecItem>> items = ParseWorkerSpec(r.workers);
  if (!items.ok()) return items.status();
  ServerMetrics metrics;
  HttpEndpoint http;
  if (absl::Status s = StartMetricsEndpoint(o, &metrics, &http); !s.ok()) return s;
  absl::StatusOr<RouterModel> model = LoadRouterModel(o.model, o.max_context);
  if (!model.ok()) return model.status();
  spdlog::info("event=tokenizer_loaded name={} context={}", model->serving->name,
               model->max_context);

  ClusterOptions co;
  co.policy = r.placement;
  co.placement.max_batch_size = r.max_batch_size;
  co.placement.kv_page_size = o.kv_page_size;
  co.max_queued = static_cast<size_t>(std::max(o.max_queued, 1));
  co.consolidation_interval = r.consolidation_interval;
  co.idle_grace = r.idle_grace;
  absl::StatusOr<std::unique_ptr<ClusterFrontend>> frontend =
      ClusterFrontend::Create(model->serving->tokenizer.get(), co);
  if (!frontend.ok()) return frontend.status();
  ClusterFrontend* fe = frontend->get();
  AddNewWorkers(*items, factory, fe);

  RouterMetrics router_metrics(&metrics);
  metrics.SetScrapeHook([&] {
    const ClusterStatus st = fe->GetStatus();
    router_metrics.Update(st);
    metrics.lora_requests_info()->Set(st.running_adapters, st.waiting_adapters,
                                      r.max_batch_size);
  });

  // Everything that can fail before a thread starts.
  absl::StatusOr<BearerAuth> admin_auth = AdminAuthFor(o);
  if (!admin_auth.ok()) return admin_auth.status();
  BearerAuth auth = *std::move(admin_auth);
  absl::StatusOr<std::unique_ptr<Admission>> admission = StartAdmission(o, &metrics);
  if (!admission.ok()) return admission.status();

  absl::Notification stop_resolver;
  std::thread resolver([&] {
    while (!stop_resolver.WaitForNotificationWithTimeout(r.resolve_interval)) {
      AddNewWorkers(*items, factory, fe);
    }
  });

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentialsFor(o);
  std::atomic<bool> serving{false};
  ClusterModelCatalog catalog(model->serving->name, model->max_context, fe);
  InferenceEdge edge({model->serving.get(), fe, &catalog, admission->get(),
                      LimitsFor(o, model->max_context), &metrics, &serving});
  InferenceService inference(&edge);
  AdminFanout fanout(r.worker_admin_port, r.worker_admin_port_offset);
  ClusterAdapterAdmin adapter_admin(fe, &fanout);
  OpenAiServer openai(&edge, &adapter_admin, OpenAiOptionsFor(o, auth));
  RouterAdminService admin(model->serving.get(), fe, std::move(auth), &serving,
                           o.kv_page_size, &fanout);
  absl::Status result = absl::OkStatus();
  std::unique_ptr<grpc::Server> inference_server, admin_server;
  if (!creds.ok()) {
    result = creds.status();
  } else {
    EnableHealthAndReflection();
    absl::StatusOr<std::unique_ptr<grpc::Server>> is = StartGrpcServer(
        ListenAddress(o.host, o.port), *creds, &inference, "loom.v1.Inference",
        o.max_request_bytes);
    absl::StatusOr<std::unique_ptr<grpc::Server>> as =
        is.ok() ? StartGrpcServer(ListenAddress(o.admin_host, o.admin_port), *creds, &admin,
                                  "loom.v1.Admin")
                : absl::StatusOr<std::unique_ptr<grpc::Server>>(is.status());
    if (is.ok()) inference_server = *std::move(is);
    if (as.ok()) admin_server = *std::move(as);
    if (!as.ok()) result = as.status();
    if (result.ok()) result = StartOpenAiServer(o, &openai);
  }
  if (result.ok()) {
    serving.store(true, std::memory_order_release);
    metrics.SetReady(true);
    spdlog::info("event=ready role=router placement={} max_batch_size={}", r.placement,
                 r.max_batch_size);
    const int sig = WaitForTerminationSignal([&] { ReloadApiKeys(o, admission->get()); });
    spdlog::info("event=shutdown signal={} grace_seconds={:.1f}", sig,
                 absl::ToDoubleSeconds(o.shutdown_grace));
    serving.store(false, std::memory_order_release);
    metrics.SetReady(false);
    inference_server->GetHealthCheckService()->SetServingStatus(false);
  }
  std::thread stopper([&] {
    if (inference_server) {
      inference_server->Shutdown(
          absl::ToChronoTime(absl::Now() + o.shutdown_grace + absl::Seconds(5)));
    }
  });
  fe->Shutdown(o.shutdown_grace);
  stopper.join();
  openai.Stop();  // its streams ended with the frontend's requests
  if (admin_server) admin_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  stop_resolver.Notify();
  resolver.join();
  http.Stop();
  metrics.SetScrapeHook(nullptr);
  frontend->reset();
  spdlog::info("event=stopped");
  return result;
}

}  // namespace loom
