// Binding and running a cpp-httplib server on its own thread, for every plain-HTTP
// listener of loomd (/metrics in http_endpoint.h, the OpenAI API in server/openai):
// SO_REUSEADDR only (httplib's default SO_REUSEPORT would let a second process bind the
// same port silently), port 0 = a free port, and a return only once the accept loop runs
// (httplib's stop() is a no-op before that).
#ifndef LOOM_SERVER_METRICS_HTTP_LISTENER_H_
#define LOOM_SERVER_METRICS_HTTP_LISTENER_H_

#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace loom {

// Sets the socket options, binds host:port and starts `server`'s accept loop on
// `*thread`; returns the bound port. Unavailable when the address cannot be bound.
absl::StatusOr<int> StartHttpListener(httplib::Server* server, const std::string& host,
                                      int port, std::thread* thread);

}  // namespace loom

#endif  // LOOM_SERVER_METRICS_HTTP_LISTENER_H_
