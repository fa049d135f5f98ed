// absl::Status at the service edge: what a client is told, over gRPC and over HTTP.
//
// Codes map 1:1 (absl/status/status.h documents the correspondence with gRPC's). The
// message is bounded and sanitised ONCE here for every protocol: at most
// kMaxClientMessageBytes bytes (cut at a character boundary, "..." appended), invalid
// UTF-8 and control characters replaced, so that an attacker-chosen name echoed in an
// error (an adapter id, a path) can neither exceed gRPC's metadata limit nor corrupt a
// JSON body or a log line.
//
// Statuses may carry two payloads the edge reads: the request field at fault (the
// OpenAI error's "param") and a retry delay (HTTP Retry-After).
#ifndef LOOM_SERVER_STATUS_MAPPING_H_
#define LOOM_SERVER_STATUS_MAPPING_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace loom {

inline constexpr size_t kMaxClientMessageBytes = 1024;

// `message` bounded and sanitised as described above.
std::string SanitizeClientMessage(std::string_view message);

// The status as a client sees it (OK stays OK).
grpc::Status GrpcStatusForClient(const absl::Status& status);

// `status` with the request field at fault attached ("temperature", "messages", ...).
absl::Status WithParam(absl::Status status, std::string_view param);
// The attached field, or "" when none.
std::string ErrorParam(const absl::Status& status);

// `status` with a retry delay attached (rate limits).
absl::Status WithRetryAfter(absl::Status status, absl::Duration delay);
// The attached delay, if any.
std::optional<absl::Duration> RetryAfter(const absl::Status& status);

}  // namespace loom

#endif  // LOOM_SERVER_STATUS_MAPPING_H_
