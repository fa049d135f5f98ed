// ServerOptions: everything loomd is configured with, and how settings are applied.
//
// A setting is a (name, text value) pair whose name is the flag's name; the optional JSON
// config file (--config) holds an object whose keys are the same names (values: strings,
// numbers, booleans; adapter_roots and preload also as arrays, preload also as an object
// {"id": "path"}). loomd applies the config file first, then every flag given on the
// command line, so flags override the file.
#ifndef LOOM_SERVER_SERVER_CONFIG_H_
#define LOOM_SERVER_SERVER_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/backend.h"
#include "server/request_limits.h"

namespace loom {

struct PreloadAdapter {
  std::string id;
  std::string source;  // resolved against the adapter roots at start
};

// What one loomd process is (ARCHITECTURE.md, "Growing past one machine").
enum class ServerRole {
  kSingle,  // the engine + loom.v1.Inference in one process (the default)
  kWorker,  // the engine behind loom.internal.v1.Worker, for a router; no Inference
  kRouter,  // loom.v1.Inference over remote workers; no engine
};

// "single", "worker", "router".
const char* ServerRoleName(ServerRole role);

struct ServerOptions {
  ServerRole role = ServerRole::kSingle;
  std::string model;                      // "" = DefaultModelPath()
  // loom-atom checkpoint (models/quant) overlaid on `model`: its linears run as Atom
  // quantized linears. "" = the model's stored weights.
  std::string quantized;
  std::string quant_scheme;               // "" = the checkpoint's; w4a4 <-> w4a8 override
  bool int8_head = false;                 // quantized only: INT8 output head (quantized_head.h)
  std::vector<std::string> adapter_roots;
  std::vector<PreloadAdapter> preload;    // loaded (and pinned) at start
  std::string host = "127.0.0.1";
  int port = 50051;                       // Inference (single), Worker (worker) service
  std::string admin_host = "127.0.0.1";
  int admin_port = 50052;
  std::string metrics_host = "127.0.0.1";
  int metrics_port = 9400;                // 0 = no HTTP endpoint
  // The OpenAI-compatible HTTP API (single and router roles).
  std::string http_host = "127.0.0.1";
  int http_port = 8000;                   // 0 = off
  int http_threads = 32;                  // concurrent HTTP connections served
  // Inference tenants (server/tenants): the API keys file; without one inference is
  // open, which loomd allows only on loopback unless allow_unauthenticated_inference.
  std::string api_keys_file;
  bool allow_unauthenticated_inference = false;
  int max_streams_per_tenant = 0;         // 0 = unlimited
  int max_batch_tokens = 512;
  int max_running = 64;
  int max_queued = 1024;
  size_t kv_bytes = size_t{512} << 20;
  int kv_page_size = 16;
  kernels::KvDtype kv_cache_dtype = kernels::KvDtype::kF16;  // f16 | int8 | int4
  size_t adapter_bytes = size_t{1} << 30;  // host-memory budget for adapter weights
  int max_context = 0;                    // 0 = the model's; else min(model's, this)
  int threads = 0;                        // 0 = all hardware threads
  std::string policy = "fcfs";            // "fcfs" | "fair"
  std::string tls_cert;                   // PEM; with tls_key enables TLS on both ports
  std::string tls_key;
  std::string tls_client_ca;              // PEM; requires client certificates (mTLS)
  std::string admin_token_file;
  bool on_demand_adapters = true;         // load unknown ids found under a root
  // On-demand loads (distinct ids) queued or running at once; a request that would start
  // one more gets RESOURCE_EXHAUSTED. Requests for an id already being loaded wait for it.
  int max_on_demand_loads = 4;
  // Adapter files larger than this are refused before anything is parsed
  // (RESOURCE_EXHAUSTED). Default: twice the default adapter budget (an F32 file holds
  // twice the bytes of its BF16 weights).
  uint64_t max_adapter_file_bytes = uint64_t{2} << 30;
  absl::Duration shutdown_grace = absl::Seconds(30);
  std::string log_level = "info";
  // The edge's limits (request_limits.h; max_context comes from the model) and the
  // largest request message (gRPC) or body (HTTP), refused before it is parsed.
  RequestLimits limits;
  int64_t max_request_bytes = int64_t{4} << 20;

  // Cross-field checks (ports, limits, TLS pairs, policy). InvalidArgument naming the
  // setting.
  absl::Status Validate() const;
};

// Names of every setting (the flag names), for the JSON keys and for loomd's flag loop.
const std::vector<std::string>& SettingNames();

// Applies one setting; InvalidArgument naming the setting and the value when the name is
// unknown or the value does not parse. Lists ("adapter_roots", "preload") are
// comma-separated; preload items are "id=path". Durations are absl durations ("30s").
absl::Status ApplySetting(const std::string& name, const std::string& value,
                          ServerOptions* options);

// Applies a JSON config document (see the file comment); InvalidArgument on bad JSON,
// an unknown key or a bad value.
absl::Status ApplyConfigJson(const std::string& json_text, ServerOptions* options);
// Reads `path` and applies it; NotFound when it cannot be read.
absl::Status ApplyConfigFile(const std::string& path, ServerOptions* options);

// True for an IPv4 address in 127.0.0.0/8 (dotted quad, each part 0-255), ::1 (also as
// [::1]) and "localhost"; false for anything else, e.g. "127.evil.example".
bool IsLoopbackHost(const std::string& host);

}  // namespace loom

#endif  // LOOM_SERVER_SERVER_CONFIG_H_
