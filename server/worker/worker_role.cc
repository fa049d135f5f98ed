#include "server/worker/worker_role.h"

#include <atomic>
#include <memory>

#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/admin_service.h"
#include "server/bearer_auth.h"
#include "server/daemon_support.h"
#include "server/engine_host.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "server/worker/worker_service.h"
#include "spdlog/spdlog.h"

namespace loom {

absl::Status RunWorkerRole(const ServerOptions& o) {
  ServerMetrics metrics;
  HttpEndpoint http;
  if (absl::Status s = StartMetricsEndpoint(o, &metrics, &http); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<EngineHost>> host = EngineHost::Start(o, &metrics);
  if (!host.ok()) return host.status();
  Engine* engine = (*host)->engine();
  absl::StatusOr<BearerAuth> admin_auth = AdminAuthFor(o);
  if (!admin_auth.ok()) return admin_auth.status();
  BearerAuth auth = *std::move(admin_auth);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentialsFor(o);
  if (!creds.ok()) return creds.status();

  std::atomic<bool> serving{false};
  WorkerService service(engine, &serving, &metrics);
  AdminService admin((*host)->model(), engine, (*host)->adapters(), std::move(auth), &serving,
                     o.kv_page_size);
  EnableHealthAndReflection();
  absl::StatusOr<std::unique_ptr<grpc::Server>> worker_server = StartGrpcServer(
      ListenAddress(o.host, o.port), *creds, &service, "loom.internal.v1.Worker");
  if (!worker_server.ok()) return worker_server.status();
  absl::StatusOr<std::unique_ptr<grpc::Server>> admin_server =
      StartGrpcServer(ListenAddress(o.admin_host, o.admin_port), *creds, &admin,
                      "loom.v1.Admin");
  if (!admin_server.ok()) return admin_server.status();
  metrics.SetScrapeHook([&] { PublishAdapterRequests(*engine, o, &metrics); });
  serving.store(true, std::memory_order_release);
  metrics.SetReady(true);
  spdlog::info("event=ready role=worker max_context={}", engine->max_context());

  const int sig = WaitForTerminationSignal();
  spdlog::info("event=shutdown signal={} grace_seconds={:.1f}", sig,
               absl::ToDoubleSeconds(o.shutdown_grace));
  // Drain: Generate refuses and heartbeats report draining (so the router places nothing
  // new here but does not fail the running streams over); running requests get the
  // grace period, then the engine ends the rest UNAVAILABLE (the router re-places them).
  // The server keeps answering heartbeats until then, and closes after.
  serving.store(false, std::memory_order_release);
  metrics.SetReady(false);
  engine->Close();
  (*worker_server)->GetHealthCheckService()->SetServingStatus(false);
  engine->Shutdown(o.shutdown_grace);
  (*worker_server)->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  (*admin_server)->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  http.Stop();
  metrics.SetScrapeHook(nullptr);
  host->reset();
  spdlog::info("event=stopped");
  return absl::OkStatus();
}

}  // namespace loom
