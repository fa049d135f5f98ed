#include "server/metrics/http_endpoint.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "server/metrics/http_listener.h"

namespace loom {

HttpEndpoint::HttpEndpoint() = default;

HttpEndpoint::~HttpEndpoint() { Stop(); }

absl::Status HttpEndpoint::Start(const std::string& host, int port, ServerMetrics* metrics) {
  if (metrics == nullptr) return absl::InvalidArgumentError("HttpEndpoint: null metrics");
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HttpEndpoint: bad port ", port));
  }
  if (server_ != nullptr) return absl::FailedPreconditionError("HttpEndpoint: already started");

  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(metrics->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  auto health = [metrics](const httplib::Request&, httplib::Response& res) {
    if (metrics->ready()) {
      res.status = 200;
      res.set_content("ok\n", "text/plain; charset=utf-8");
    } else {
      res.status = 503;
      res.set_content("not ready\n", "text/plain; charset=utf-8");
    }
  };
  server->Get("/healthz", health);
  server->Get("/readyz", health);

  absl::StatusOr<int> bound = StartHttpListener(server.get(), host, port, &thread_);
  if (!bound.ok()) {
    return absl::Status(bound.status().code(),
                        absl::StrCat("HttpEndpoint: ", bound.status().message()));
  }
  server_ = std::move(server);
  port_ = *bound;
  return absl::OkStatus();
}

void HttpEndpoint::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  port_ = 0;
}

}  // namespace loom
