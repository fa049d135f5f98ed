// loomd: the Loom serving daemon. --role picks what this process is:
//   single (default): loads the base model, serves loom.v1.Inference (with
//     grpc.health.v1 and server reflection) on --host:--port;
//   worker: the same engine behind loom.internal.v1.Worker on --host:--port, for a
//     router (server/worker/worker_role.h); no loom.v1.Inference;
//   router: loom.v1.Inference and loom.v1.Admin over remote workers
//     (server/router/router_server.h: --workers, --placement, --max_batch_size, ...).
// Single and worker also serve loom.v1.Admin on --admin_host:--admin_port, and /metrics
// + /healthz on --metrics_port. SIGTERM/SIGINT: stop accepting, let in-flight streams
// finish within --shutdown_grace, exit 0.
// Settings: an optional JSON --config whose keys are the flag names, overridden by the
// flags given on the command line (server/server_config.h).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "models/default_model.h"
#include "server/admin_service.h"
#include "server/daemon_support.h"
#include "server/engine_host.h"
#include "scheduler/frontend/local_frontend.h"
#include "server/inference_edge.h"
#include "server/inference_service.h"
#include "server/adapter_admin.h"
#include "server/model_catalog.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "server/server_config.h"
#include "server/router/router_role.h"
#include "server/worker/worker_role.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, config, "", "JSON config file; its keys are these flags' names");
ABSL_FLAG(std::string, role, "single", "single, worker (engine for a router) or router");
ABSL_FLAG(std::string, model, "", "base model: GGUF file or HF directory (default: SmolLM2)");
ABSL_FLAG(std::string, quantized, "",
          "loom-atom quantized checkpoint directory (loom_quantize) overlaid on --model");
ABSL_FLAG(bool, int8_head, false,
          "with --quantized: run the output head as an INT8 Atom linear, requantized at load "
          "(faster at large batches; SmolLM2 W8A8 perplexity +0.3%)");
ABSL_FLAG(std::string, quant_scheme, "",
          "activation precision override for --quantized: w4a4 or w4a8 (\"\" = the checkpoint's)");
ABSL_FLAG(std::string, adapter_roots, "", "comma-separated directories adapters load from");
ABSL_FLAG(std::string, preload, "", "adapters loaded at start: id=path,id=path,...");
ABSL_FLAG(std::string, host, "127.0.0.1", "inference (worker: Worker service) listen address");
ABSL_FLAG(int, port, 50051, "inference (worker: Worker service) port");
ABSL_FLAG(std::string, admin_host, "127.0.0.1", "admin listen address");
ABSL_FLAG(int, admin_port, 50052, "admin port");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1", "HTTP /metrics and /healthz address");
ABSL_FLAG(int, metrics_port, 9400, "HTTP /metrics and /healthz port (0 = off)");
ABSL_FLAG(std::string, http_host, "127.0.0.1", "OpenAI-compatible HTTP API listen address");
ABSL_FLAG(int, http_port, 8000, "OpenAI-compatible HTTP API port (0 = off)");
ABSL_FLAG(int, http_threads, 32, "HTTP connections served at once");
ABSL_FLAG(std::string, api_keys_file, "",
          "inference API keys (JSON: tenants, their keys, adapters, tokens_per_minute); "
          "reloaded on SIGHUP");
ABSL_FLAG(bool, allow_unauthenticated_inference, false,
          "serve inference without API keys off loopback");
ABSL_FLAG(int, max_streams_per_tenant, 0, "concurrent streams per tenant (0 = unlimited)");
ABSL_FLAG(int, max_batch_tokens, 512, "tokens per forward step");
ABSL_FLAG(int, max_running, 64, "sequences in the running batch");
ABSL_FLAG(int, max_queued, 1024, "waiting requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, kv_bytes, int64_t{512} << 20, "KV cache budget in bytes");
ABSL_FLAG(int, kv_page_size, 16, "tokens per KV page");
ABSL_FLAG(std::string, kv_cache_dtype, "f16",
          "KV cache rows: f16, int8 (symmetric, 1.9x the tokens) or int4 (asymmetric, 3.6x)");
ABSL_FLAG(int64_t, adapter_bytes, int64_t{1} << 30, "host-memory budget for adapter weights");
ABSL_FLAG(int, max_context, 0, "max prompt + generated tokens (0 = the model's)");
ABSL_FLAG(int, threads, 0, "kernel threads (0 = all hardware threads)");
ABSL_FLAG(std::string, policy, "fcfs", "admission policy: fcfs or fair");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate (enables TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM server private key");
ABSL_FLAG(std::string, tls_client_ca, "", "PEM CA of client certificates (requires mTLS)");
ABSL_FLAG(std::string, admin_token_file, "", "file holding the admin bearer token");
ABSL_FLAG(bool, on_demand_adapters, true, "load an unknown adapter id found under a root");
ABSL_FLAG(int, max_on_demand_loads, 4,
          "on-demand adapter loads (distinct ids) queued or running at once; more get "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_adapter_file_bytes, int64_t{2} << 30,
          "adapter files larger than this are refused before parsing");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(30), "drain time on SIGTERM");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off");
// Request limits (the edge refuses a request beyond them, naming the field).
ABSL_FLAG(int64_t, max_prompt_bytes, 1 << 20, "prompt text (or chat) bytes per request");
ABSL_FLAG(int, max_prompt_tokens, 0, "prompt tokens per request (0 = the context)");
ABSL_FLAG(int, max_stop_strings, 16, "stop strings per request");
ABSL_FLAG(int, max_stop_string_bytes, 256, "bytes per stop string");
ABSL_FLAG(int, max_new_tokens, 0, "largest max_tokens a request may ask for (0 = the context)");
ABSL_FLAG(int, default_max_tokens, 256, "max_tokens of a request that names none");
ABSL_FLAG(int, max_top_logprobs, 20, "alternatives per token a request may ask for (<= 20)");
ABSL_FLAG(int, max_n, 8, "choices (OpenAI n) per request");
ABSL_FLAG(int64_t, max_request_bytes, int64_t{4} << 20,
          "largest gRPC request message / HTTP request body, refused before parsing");

namespace loom {
namespace {

// Names of the flags given on the command line (absl does not expose this publicly in
// this version): "--name", "--name=value", "-name" and "--noname" for booleans.
std::set<std::string> SpecifiedFlags(int argc, char** argv) {
  std::set<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.empty() || a[0] != '-') continue;
    a = a.substr(a.find_first_not_of('-'));
    a = a.substr(0, a.find('='));
    out.insert(a);
    if (a.rfind("no", 0) == 0) out.insert(a.substr(2));
  }
  return out;
}

absl::StatusOr<ServerOptions> ParseOptions(const std::set<std::string>& specified) {
  ServerOptions o;
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    if (absl::Status s = ApplyConfigFile(path, &o); !s.ok()) return s;
  }
  for (const std::string& name : SettingNames()) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || specified.count(name) == 0) continue;
    if (absl::Status s = ApplySetting(name, flag->CurrentValue(), &o); !s.ok()) return s;
  }
  if (o.model.empty()) o.model = DefaultModelPath();
  if (absl::Status s = o.Validate(); !s.ok()) return s;
  return o;
}

// --role=single: the engine and loom.v1.Inference in this process.
absl::Status ServeSingle(const ServerOptions& o) {
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
  const ServingModel* model = (*host)->model();
  LocalFrontend frontend(model->tokenizer.get(), engine);
  LocalModelCatalog catalog(model->name, engine->max_context(), (*host)->store());
  absl::StatusOr<std::unique_ptr<Admission>> admission = StartAdmission(o, &metrics);
  if (!admission.ok()) return admission.status();
  InferenceEdge edge({model, &frontend, &catalog, admission->get(),
                      LimitsFor(o, engine->max_context()), &metrics, &serving});
  InferenceService inference(&edge);
  LocalAdapterAdmin adapter_admin((*host)->adapters());
  OpenAiServer openai(&edge, &adapter_admin, OpenAiOptionsFor(o, auth));
  AdminService admin((*host)->model(), engine, (*host)->adapters(), std::move(auth), &serving,
                     o.kv_page_size);
  EnableHealthAndReflection();
  absl::StatusOr<std::unique_ptr<grpc::Server>> inference_server =
      StartGrpcServer(ListenAddress(o.host, o.port), *creds, &inference, "loom.v1.Inference",
                      o.max_request_bytes);
  if (!inference_server.ok()) return inference_server.status();
  absl::StatusOr<std::unique_ptr<grpc::Server>> admin_server =
      StartGrpcServer(ListenAddress(o.admin_host, o.admin_port), *creds, &admin,
                      "loom.v1.Admin");
  if (!admin_server.ok()) return admin_server.status();
  if (absl::Status s = StartOpenAiServer(o, &openai); !s.ok()) return s;
  metrics.SetScrapeHook([&] { PublishAdapterRequests(*engine, o, &metrics); });
  serving.store(true, std::memory_order_release);
  metrics.SetReady(true);
  spdlog::info("event=ready role=single max_context={}", engine->max_context());

  const int sig = WaitForTerminationSignal([&] { ReloadApiKeys(o, admission->get()); });
  spdlog::info("event=shutdown signal={} grace_seconds={:.1f}", sig,
               absl::ToDoubleSeconds(o.shutdown_grace));
  serving.store(false, std::memory_order_release);
  metrics.SetReady(false);
  (*inference_server)->GetHealthCheckService()->SetServingStatus(false);
  // Stop accepting; in-flight streams end when the engine finishes or cancels them.
  std::thread stopper([&] {
    (*inference_server)->Shutdown(absl::ToChronoTime(absl::Now() + o.shutdown_grace +
                                                     absl::Seconds(5)));
  });
  engine->Shutdown(o.shutdown_grace);
  stopper.join();
  openai.Stop();  // its streams ended with the engine's requests
  (*admin_server)->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  http.Stop();
  metrics.SetScrapeHook(nullptr);
  host->reset();
  spdlog::info("event=stopped");
  return absl::OkStatus();
}

// One entry point per role.
absl::Status Run(const ServerOptions& o) {
  switch (o.role) {
    case ServerRole::kSingle:
      return ServeSingle(o);
    case ServerRole::kWorker:
      return RunWorkerRole(o);
    case ServerRole::kRouter:
      return RunRouterRole(o);
  }
  return absl::InvalidArgumentError("unknown role");
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  // Signals are taken by sigwait in Serve; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  absl::SetProgramUsageMessage("loomd: the Loom LoRA serving daemon");
  const std::set<std::string> specified = loom::SpecifiedFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  spdlog::set_default_logger(spdlog::stderr_color_mt("loomd"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e level=%l %v");
  absl::StatusOr<loom::ServerOptions> options = loom::ParseOptions(specified);
  if (!options.ok()) {
    spdlog::critical("event=bad_config error=\"{}\"", std::string(options.status().message()));
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(options->log_level));
  if (absl::Status s = loom::Run(*options); !s.ok()) {
    spdlog::critical("event=fatal code={} error=\"{}\"", absl::StatusCodeToString(s.code()),
                     std::string(s.message()));
    return 1;
  }
  return 0;
}
