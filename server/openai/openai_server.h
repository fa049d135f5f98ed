// OpenAiServer: the OpenAI-compatible HTTP API of loomd (single and router roles), on
// its own port (cpp-httplib, a pool of `threads` connection threads), over the same
// InferenceEdge as loom.v1.Inference:
//
//   POST /v1/completions, /v1/chat/completions   stream or not (SSE: "data: {...}\n\n"
//        frames, then "data: [DONE]\n\n"; stream_options.include_usage); the adapter is
//        `model` (the base model's id = no adapter; an unknown id that an adapter root
//        holds loads on first use).
//   GET  /v1/models                               the base model and every loaded adapter
//                                                 (parent = the base model), as vLLM.
//   POST /v1/load_lora_adapter {"lora_name", "lora_path"}, /v1/unload_lora_adapter
//        {"lora_name"}: vLLM's runtime adapter calls, behind the admin token
//        (Authorization: Bearer; without an admin token only on a loopback listener).
//   GET  /health                                  200 while serving, else 503.
//
// Inference calls authenticate with "Authorization: Bearer KEY" when loomd has an API
// keys file. Errors are OpenAI's JSON ({"error": {"message", "type", "param", "code"}})
// with 400 (naming the field), 401, 403, 404 (model_not_found), 413 (body over
// max_body_bytes, refused before it is read whole), 429 (with Retry-After), 503. A
// streaming request's errors before its first token are such responses too; later ones
// are an {"error": ...} frame before [DONE]. A client that disconnects mid-stream has its
// request cancelled when the next frame cannot be written.
#ifndef LOOM_SERVER_OPENAI_OPENAI_SERVER_H_
#define LOOM_SERVER_OPENAI_OPENAI_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/adapter_admin.h"
#include "server/bearer_auth.h"
#include "server/inference_edge.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace loom {

struct OpenAiServerOptions {
  int threads = 32;                        // connections served at once
  int64_t max_body_bytes = int64_t{4} << 20;
  BearerAuth admin_auth;                   // for the load/unload calls
  bool adapter_calls_without_token = false;  // no admin token and a loopback listener
};

class OpenAiServer {
 public:
  // `edge` and `adapter_admin` (may be null: load/unload answer 501) must outlive Stop().
  OpenAiServer(const InferenceEdge* edge, AdapterAdmin* adapter_admin,
               OpenAiServerOptions options);
  ~OpenAiServer();  // Stop()
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds host:port (0: a free port) and serves; Unavailable if it cannot bind.
  absl::Status Start(const std::string& host, int port);
  // Stops accepting; in-flight requests finish (streams end when their requests do).
  void Stop();
  int port() const { return port_; }

 private:
  void Routes();

  const InferenceEdge* const edge_;
  AdapterAdmin* const adapter_admin_;
  const OpenAiServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace loom

#endif  // LOOM_SERVER_OPENAI_OPENAI_SERVER_H_
