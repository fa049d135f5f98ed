#include "server/openai/openai_server.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "server/metrics/http_listener.h"
#include "nlohmann/json.hpp"
#include "server/openai/completion_handler.h"
#include "server/openai/openai_response.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

using nlohmann::json;

// The body's lora_name (and lora_path when `with_path`) for vLLM's adapter calls.
absl::Status ReadAdapterCall(const std::string& body, bool with_path, std::string* name,
                             std::string* path) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  auto field = [&doc](const char* key) {
    return doc.is_object() && doc.contains(key) && doc.at(key).is_string()
               ? doc.at(key).get<std::string>()
               : std::string();
  };
  *name = field("lora_name");
  if (name->empty()) {
    return WithParam(absl::InvalidArgumentError("lora_name is required"), "lora_name");
  }
  if (!with_path) return absl::OkStatus();
  *path = field("lora_path");
  if (path->empty()) {
    return WithParam(absl::InvalidArgumentError("lora_path is required"), "lora_path");
  }
  return absl::OkStatus();
}

}  // namespace

OpenAiServer::OpenAiServer(const InferenceEdge* edge, AdapterAdmin* adapter_admin,
                           OpenAiServerOptions options)
    : edge_(edge), adapter_admin_(adapter_admin), options_(std::move(options)) {}

OpenAiServer::~OpenAiServer() { Stop(); }

void OpenAiServer::Routes() {
  const InferenceEdge* edge = edge_;
  server_->Post("/v1/completions", [edge](const httplib::Request& req, httplib::Response& res) {
    HandleCompletion(*edge, OpenAiEndpoint::kCompletions, req, res);
  });
  server_->Post("/v1/chat/completions",
                [edge](const httplib::Request& req, httplib::Response& res) {
                  HandleCompletion(*edge, OpenAiEndpoint::kChatCompletions, req, res);
                });
  server_->Get("/v1/models", [edge](const httplib::Request& req, httplib::Response& res) {
    if (absl::Status s = edge->Authenticate(req.get_header_value("Authorization")); !s.ok()) {
      return WriteError(s, res);
    }
    res.set_content(Dump(ModelList(edge->catalog().List(), absl::ToUnixSeconds(absl::Now()))),
                    "application/json");
  });
  server_->Get("/health", [edge](const httplib::Request&, httplib::Response& res) {
    res.status = edge->serving() ? 200 : 503;
  });
  auto adapter_call = [this](bool load) {
    return [this, load](const httplib::Request& req, httplib::Response& res) {
      const std::string authorization = req.get_header_value("Authorization");
      absl::Status s = options_.admin_auth.Check(authorization);
      if (s.ok() && !options_.admin_auth.required() && !options_.adapter_calls_without_token) {
        s = absl::PermissionDeniedError(
            "adapter calls off loopback need loomd's admin_token_file");
      }
      if (s.ok() && adapter_admin_ == nullptr) {
        s = absl::UnimplementedError("adapter calls are not available on this server");
      }
      std::string name, path;
      if (s.ok()) s = ReadAdapterCall(req.body, load, &name, &path);
      if (s.ok()) {
        s = load ? adapter_admin_->Load(name, path, authorization)
                 : adapter_admin_->Unload(name, authorization);
      }
      if (!s.ok()) return WriteError(s, res);
      res.set_content(absl::StrCat("Success: LoRA adapter '", name, "' ",
                                   load ? "added" : "removed", " successfully."),
                      "text/plain");
    };
  };
  server_->Post("/v1/load_lora_adapter", adapter_call(true));
  server_->Post("/v1/unload_lora_adapter", adapter_call(false));
  // Unknown routes and oversized bodies get OpenAI's error shape too.
  server_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    absl::Status s = res.status == 413
                         ? absl::InvalidArgumentError("the request body is too large")
                         : absl::NotFoundError(absl::StrCat("no route ", req.method, " ", req.path));
    const int code = res.status;
    res.set_content(Dump(ErrorBody(s)), "application/json");
    res.status = code;
  });
}

absl::Status OpenAiServer::Start(const std::string& host, int port) {
  if (server_ != nullptr) return absl::FailedPreconditionError("OpenAiServer: already started");
  auto server = std::make_unique<httplib::Server>();
  const int threads = options_.threads;
  server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server->set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
  server->set_keep_alive_timeout(5);
  server_ = std::move(server);
  Routes();
  absl::StatusOr<int> bound = StartHttpListener(server_.get(), host, port, &thread_);
  if (!bound.ok()) {
    server_.reset();
    return absl::Status(bound.status().code(),
                        absl::StrCat("OpenAiServer: ", bound.status().message()));
  }
  port_ = *bound;
  return absl::OkStatus();
}

void OpenAiServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  port_ = 0;
}

}  // namespace loom
