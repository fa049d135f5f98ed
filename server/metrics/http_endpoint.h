// HttpEndpoint: the plain-HTTP side of loomd (port 9400 by default), on its own threads
// (cpp-httplib, a 2-thread worker pool).
//
//   GET /metrics  200, Content-Type "text/plain; version=0.0.4; charset=utf-8", the
//                 Prometheus text exposition of ServerMetrics::Render().
//   GET /healthz  200 "ok\n" when metrics->ready(), else 503 "not ready\n" (readiness:
//                 false until the model is loaded). /readyz is an alias.
//   anything else 404.
//
// Usage:
//   HttpEndpoint http;
//   absl::Status s = http.Start("0.0.0.0", 9400, &metrics);  // port 0: a free port
//   int port = http.port();                                  // the bound port
//   ...
//   http.Stop();                                             // also done by ~HttpEndpoint
// `metrics` must outlive Stop(). Start on a started endpoint is FailedPrecondition; a
// stopped endpoint may be started again.
#ifndef LOOM_SERVER_METRICS_HTTP_ENDPOINT_H_
#define LOOM_SERVER_METRICS_HTTP_ENDPOINT_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/metrics/server_metrics.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace loom {

class HttpEndpoint {
 public:
  HttpEndpoint();
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // Binds host:port and starts serving; returns once the listener is accepting.
  // InvalidArgument for a null `metrics` or a port outside [0, 65535]; Unavailable if
  // the address cannot be bound (in use, bad host); FailedPrecondition if started.
  absl::Status Start(const std::string& host, int port, ServerMetrics* metrics);
  // Stops accepting, finishes in-flight requests, joins the thread. Idempotent.
  void Stop();
  // The bound port (meaningful after a successful Start), else 0.
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace loom

#endif  // LOOM_SERVER_METRICS_HTTP_ENDPOINT_H_
