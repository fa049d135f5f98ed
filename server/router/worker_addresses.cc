#include "server/router/worker_addresses.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace loom {

absl::StatusOr<std::vector<WorkerSpecItem>> ParseWorkerSpec(const std::string& spec) {
  std::vector<WorkerSpecItem> out;
  for (absl::string_view raw : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    absl::string_view item = absl::StripAsciiWhitespace(raw);
    WorkerSpecItem w;
    absl::string_view rest = item;
    if (absl::ConsumePrefix(&rest, "dns:///") || absl::ConsumePrefix(&rest, "dns:")) {
      w.dns = true;
    }
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("workers: '%s' has no port (host:port or dns:///name:port)", item));
    }
    absl::string_view host = rest.substr(0, colon);
    if (absl::ConsumePrefix(&host, "[")) {
      if (!absl::ConsumeSuffix(&host, "]")) {
        return absl::InvalidArgumentError(absl::StrFormat("workers: bad IPv6 in '%s'", item));
      }
    }
    int port = 0;
    if (!absl::SimpleAtoi(rest.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrFormat("workers: bad port in '%s' (1..65535)", item));
    }
    if (host.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("workers: empty host in '%s'", item));
    }
    w.host = std::string(host);
    w.port = port;
    out.push_back(std::move(w));
  }
  if (out.empty()) return absl::InvalidArgumentError("workers: the list is empty");
  return out;
}

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrFormat("[%s]:%d", host, port);
  return absl::StrFormat("%s:%d", host, port);
}

absl::StatusOr<std::vector<std::string>> ResolveWorkers(
    const std::vector<WorkerSpecItem>& items) {
  std::vector<std::string> out;
  absl::Status last_error = absl::OkStatus();
  for (const WorkerSpecItem& item : items) {
    if (!item.dns) {
      out.push_back(JoinHostPort(item.host, item.port));
      continue;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(item.host.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      last_error = absl::UnavailableError(
          absl::StrFormat("workers: cannot resolve '%s': %s", item.host, gai_strerror(rc)));
      continue;
    }
    std::vector<std::string> resolved;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      char buf[INET6_ADDRSTRLEN] = {0};
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf,
                  sizeof(buf));
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf,
                  sizeof(buf));
      } else {
        continue;
      }
      resolved.push_back(JoinHostPort(buf, item.port));
    }
    freeaddrinfo(res);
    std::sort(resolved.begin(), resolved.end());
    resolved.erase(std::unique(resolved.begin(), resolved.end()), resolved.end());
    out.insert(out.end(), resolved.begin(), resolved.end());
  }
  if (out.empty() && !last_error.ok()) return last_error;
  // Deduplicate across items, keeping first occurrences.
  std::vector<std::string> unique;
  for (std::string& a : out) {
    if (std::find(unique.begin(), unique.end(), a) == unique.end()) unique.push_back(a);
  }
  return unique;
}

}  // namespace loom
