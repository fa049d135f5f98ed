#include "server/status_mapping.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

constexpr char kParamUrl[] = "type.loom.dev/loom.error.param";
constexpr char kRetryAfterUrl[] = "type.loom.dev/loom.error.retry_after_ms";

}  // namespace

std::string SanitizeClientMessage(std::string_view message) {
  std::string out;
  out.reserve(std::min(message.size(), kMaxClientMessageBytes) + 8);
  size_t i = 0;
  while (i < message.size()) {
    size_t len = 1;
    uint32_t cp = 0;
    const utf8::Scan scan = utf8::ScanChar(message.substr(i), &len, &cp);
    std::string piece;
    if (scan != utf8::Scan::kValid) {
      piece = absl::StrFormat("\\x%02x", static_cast<unsigned char>(message[i]));
      len = 1;
    } else if (cp < 0x20 || cp == 0x7f) {
      piece = cp == '\n' || cp == '\t' ? " " : absl::StrFormat("\\x%02x", cp);
    } else {
      piece.assign(message.substr(i, len));
    }
    if (out.size() + piece.size() > kMaxClientMessageBytes - 3) {
      out += "...";
      return out;
    }
    out += piece;
    i += len;
  }
  return out;
}

grpc::Status GrpcStatusForClient(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  int code = static_cast<int>(s.code());
  if (code < 1 || code > 16) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  return grpc::Status(static_cast<grpc::StatusCode>(code), SanitizeClientMessage(std::string_view(s.message().data(), s.message().size())));
}

absl::Status WithParam(absl::Status status, std::string_view param) {
  if (!status.ok()) status.SetPayload(kParamUrl, absl::Cord(absl::string_view(param.data(), param.size())));
  return status;
}

std::string ErrorParam(const absl::Status& status) {
  auto p = status.GetPayload(kParamUrl);
  return p ? std::string(*p) : std::string();
}

absl::Status WithRetryAfter(absl::Status status, absl::Duration delay) {
  if (!status.ok()) {
    status.SetPayload(kRetryAfterUrl,
                      absl::Cord(absl::StrCat(absl::ToInt64Milliseconds(delay))));
  }
  return status;
}

std::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  auto p = status.GetPayload(kRetryAfterUrl);
  int64_t ms = 0;
  if (!p || !absl::SimpleAtoi(std::string(*p), &ms)) return std::nullopt;
  return absl::Milliseconds(ms);
}

}  // namespace loom
