#include "server/daemon_support.h"

#include <signal.h>

#include <cstdio>

#include "absl/strings/str_format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "spdlog/spdlog.h"

namespace loom {

std::string ListenAddress(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return v6 ? absl::StrFormat("[%s]:%d", host, port) : absl::StrFormat("%s:%d", host, port);
}

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrFormat("cannot read '%s'", path));
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
  std::fclose(f);
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const ServerOptions& o) {
  if (o.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> cert = ReadFile(o.tls_cert), key = ReadFile(o.tls_key);
  if (!cert.ok()) return cert.status();
  if (!key.ok()) return key.status();
  pair.cert_chain = *cert;
  pair.private_key = *key;
  ssl.pem_key_cert_pairs.push_back(pair);
  if (!o.tls_client_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(o.tls_client_ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

void EnableHealthAndReflection() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& address, const std::shared_ptr<grpc::ServerCredentials>& creds,
    grpc::Service* service, const char* service_name, int64_t max_message_bytes) {
  grpc::ServerBuilder builder;
  if (max_message_bytes > 0) builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  int bound = 0;
  builder.AddListeningPort(address, creds, &bound);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    return absl::UnavailableError(absl::StrFormat("cannot listen on %s", address));
  }
  server->GetHealthCheckService()->SetServingStatus(service_name, true);
  server->GetHealthCheckService()->SetServingStatus(true);
  spdlog::info("event=listening service={} address={} port={}", service_name, address, bound);
  return server;
}

void PublishAdapterRequests(const Engine& engine, const ServerOptions& o,
                            ServerMetrics* metrics) {
  const EngineStats st = engine.GetStats();
  metrics->lora_requests_info()->Set(st.running_adapters, st.waiting_adapters, o.max_running);
}

OpenAiServerOptions OpenAiOptionsFor(const ServerOptions& o, const BearerAuth& admin_auth) {
  OpenAiServerOptions h;
  h.threads = o.http_threads;
  h.max_body_bytes = o.max_request_bytes;
  h.admin_auth = admin_auth;
  h.adapter_calls_without_token = !admin_auth.required() && IsLoopbackHost(o.http_host);
  return h;
}

absl::Status StartOpenAiServer(const ServerOptions& o, OpenAiServer* server) {
  if (o.http_port == 0) return absl::OkStatus();
  if (absl::Status s = server->Start(o.http_host, o.http_port); !s.ok()) return s;
  spdlog::info("event=listening service=openai_http address={}",
               ListenAddress(o.http_host, server->port()));
  return absl::OkStatus();
}

RequestLimits LimitsFor(const ServerOptions& o, int max_context) {
  RequestLimits limits = o.limits;
  limits.max_context = max_context;
  return limits;
}

EngineOptions ToEngineOptions(const ServerOptions& o) {
  EngineOptions e;
  e.name = ListenAddress(o.host, o.port);
  e.max_batch_tokens = o.max_batch_tokens;
  e.max_running = o.max_running;
  e.max_queued = o.max_queued;
  e.policy = o.policy == "fair" ? AdmissionPolicy::kFairShare : AdmissionPolicy::kFcfs;
  e.kv.page_size = o.kv_page_size;
  e.kv.budget_bytes = o.kv_bytes;
  e.kv.dtype = o.kv_cache_dtype;
  e.max_context = o.max_context;
  return e;
}

int WaitForTerminationSignal(const std::function<void()>& on_hangup) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig != SIGHUP) return sig;
    if (on_hangup) on_hangup();
  }
}

absl::StatusOr<std::unique_ptr<Admission>> StartAdmission(const ServerOptions& o,
                                                          ServerMetrics* metrics) {
  AdmissionOptions ao;
  ao.max_streams_per_tenant = o.max_streams_per_tenant;
  auto admission = std::make_unique<Admission>(ao, metrics);
  if (o.api_keys_file.empty()) return admission;
  if (absl::Status s = admission->LoadKeys(o.api_keys_file); !s.ok()) return s;
  spdlog::info("event=api_keys_loaded path={}", o.api_keys_file);
  return admission;
}

void ReloadApiKeys(const ServerOptions& o, Admission* admission) {
  if (o.api_keys_file.empty()) {
    spdlog::info("event=sighup api_keys_file=none");
    return;
  }
  if (absl::Status s = admission->LoadKeys(o.api_keys_file); !s.ok()) {
    spdlog::error("event=api_keys_reload_failed keeping=previous error=\"{}\"",
                  std::string(s.message()));
    return;
  }
  spdlog::info("event=api_keys_reloaded path={}", o.api_keys_file);
}

absl::Status StartMetricsEndpoint(const ServerOptions& o, ServerMetrics* metrics,
                                  HttpEndpoint* http) {
  if (o.metrics_port <= 0) return absl::OkStatus();
  if (absl::Status s = http->Start(o.metrics_host, o.metrics_port, metrics); !s.ok()) return s;
  spdlog::info("event=listening service=http address={}",
               ListenAddress(o.metrics_host, http->port()));
  return absl::OkStatus();
}

absl::StatusOr<BearerAuth> AdminAuthFor(const ServerOptions& o) {
  if (o.admin_token_file.empty()) return BearerAuth();
  return BearerAuth::FromFile(o.admin_token_file);
}

}  // namespace loom
