#include "server/metrics/http_endpoint.h"

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"

#include <sys/socket.h>

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
  // httplib's default also sets SO_REUSEPORT, which would let a second process bind the
  // same port silently; keep only SO_REUSEADDR (quick restart over TIME_WAIT).
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
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

  int bound = 0;
  if (port == 0) {
    bound = server->bind_to_any_port(host);
    if (bound <= 0) bound = -1;
  } else {
    bound = server->bind_to_port(host, port) ? port : -1;
  }
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrCat("HttpEndpoint: cannot bind ", host, ":", port));
  }

  httplib::Server* raw = server.get();
  auto finished = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([raw, finished] {
    raw->listen_after_bind();
    finished->store(true);
  });
  // Server::stop() is a no-op until the accept loop runs, so wait for it to start (or
  // to have ended at once, which is a failure).
  while (!raw->is_running() && !finished->load()) absl::SleepFor(absl::Milliseconds(1));
  if (finished->load()) {
    thread_.join();
    return absl::InternalError("HttpEndpoint: accept loop ended at start");
  }
  server_ = std::move(server);
  port_ = bound;
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
