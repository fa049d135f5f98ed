#include "server/bearer_auth.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace loom {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

absl::StatusOr<BearerAuth> BearerAuth::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("cannot read admin token file '%s'", path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("admin token file '%s' is empty", path));
  }
  return BearerAuth(std::move(token));
}

absl::Status BearerAuth::Check(std::string_view header) const {
  if (token_.empty()) return absl::OkStatus();
  if (header.empty()) {
    return absl::UnauthenticatedError(
        "admin calls need the metadata 'authorization: Bearer <token>'");
  }
  constexpr std::string_view kPrefix = "Bearer ";
  if (!absl::StartsWithIgnoreCase(absl::string_view(header.data(), header.size()), absl::string_view(kPrefix.data(), kPrefix.size()))) {
    return absl::UnauthenticatedError("authorization metadata is not a Bearer token");
  }
  if (!ConstantTimeEquals(header.substr(kPrefix.size()), token_)) {
    return absl::UnauthenticatedError("invalid admin token");
  }
  return absl::OkStatus();
}

}  // namespace loom
