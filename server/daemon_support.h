// Pieces every loomd role uses to stand up its gRPC listeners and wait for a stop signal.
// Kept out of loomd_main.cc so each role's entry point (single in loomd_main.cc, worker
// in server/worker, router in server/router) builds its servers the same way.
#ifndef LOOM_SERVER_DAEMON_SUPPORT_H_
#define LOOM_SERVER_DAEMON_SUPPORT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "scheduler/engine/engine.h"
#include "server/bearer_auth.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "server/openai/openai_server.h"
#include "server/server_config.h"
#include "server/tenants/admission.h"

namespace loom {

// "host:port", or "[v6]:port" for a bare IPv6 host.
std::string ListenAddress(const std::string& host, int port);

// Insecure without tls_cert; else TLS with the PEM pair, and required client certificates
// verified against tls_client_ca when given. NotFound when a file cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const ServerOptions& options);

// Turns on the default grpc.health.v1 service and server reflection for every server
// built afterwards. Call once before StartGrpcServer.
void EnableHealthAndReflection();

// Builds and starts one gRPC server at `address` with `service`, and marks `service_name`
// and the server as a whole SERVING in its health service. `max_message_bytes` > 0 bounds
// a request message (larger ones fail RESOURCE_EXHAUSTED before they are parsed).
// Unavailable when the address cannot be bound.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& address, const std::shared_ptr<grpc::ServerCredentials>& creds,
    grpc::Service* service, const char* service_name, int64_t max_message_bytes = 0);

// The request limits of `options` for a model whose context is `max_context` tokens.
RequestLimits LimitsFor(const ServerOptions& options, int max_context);

// Starts `http` (/metrics and /healthz of `metrics`) on metrics_host:metrics_port and logs
// its address; nothing when metrics_port is 0. Errors of HttpEndpoint::Start.
absl::Status StartMetricsEndpoint(const ServerOptions& options, ServerMetrics* metrics,
                                  HttpEndpoint* http);

// The admin listener's bearer token from admin_token_file; an empty BearerAuth (no token
// required) when none is configured. Errors of BearerAuth::FromFile.
absl::StatusOr<BearerAuth> AdminAuthFor(const ServerOptions& options);

// Sets loom_lora_requests_info from the engine's running / waiting adapters (the scrape
// hook of the roles with an engine); max_lora = max_running.
void PublishAdapterRequests(const Engine& engine, const ServerOptions& options,
                            ServerMetrics* metrics);

// The OpenAI HTTP API's settings of `options` (admin token `admin_auth` for its adapter
// calls, allowed without one only on a loopback listener).
OpenAiServerOptions OpenAiOptionsFor(const ServerOptions& options, const BearerAuth& admin_auth);

// Starts `server` on http_host:http_port and logs it; nothing when http_port is 0.
absl::Status StartOpenAiServer(const ServerOptions& options, OpenAiServer* server);

// The engine settings of `options`.
EngineOptions ToEngineOptions(const ServerOptions& options);

// Blocks until SIGTERM or SIGINT (which main() must have blocked in every thread, with
// SIGHUP) and returns it; each SIGHUP meanwhile runs `on_hangup`.
int WaitForTerminationSignal(const std::function<void()>& on_hangup = nullptr);

// The inference admission of `options` (api_keys_file loaded when given: its errors).
absl::StatusOr<std::unique_ptr<Admission>> StartAdmission(const ServerOptions& options,
                                                          ServerMetrics* metrics);
// SIGHUP: reloads api_keys_file; a bad file keeps the keys in force and logs why.
void ReloadApiKeys(const ServerOptions& options, Admission* admission);

}  // namespace loom

#endif  // LOOM_SERVER_DAEMON_SUPPORT_H_
