#include "server/metrics/http_listener.h"

#include <sys/socket.h>

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"

namespace loom {

absl::StatusOr<int> StartHttpListener(httplib::Server* server, const std::string& host,
                                      int port, std::thread* thread) {
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const int bound = port == 0 ? server->bind_to_any_port(host)
                              : (server->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return absl::UnavailableError(absl::StrCat("cannot bind ", host, ":", port));
  auto finished = std::make_shared<std::atomic<bool>>(false);
  *thread = std::thread([server, finished] {
    server->listen_after_bind();
    finished->store(true);
  });
  while (!server->is_running() && !finished->load()) absl::SleepFor(absl::Milliseconds(1));
  if (finished->load()) {
    thread->join();
    return absl::InternalError(absl::StrCat("the accept loop on ", host, ":", port,
                                            " ended at start"));
  }
  return bound;
}

}  // namespace loom
