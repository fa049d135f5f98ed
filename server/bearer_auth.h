// Admin authentication: `authorization: Bearer <token>` metadata checked against the
// configured token in constant time (the comparison's duration does not depend on where
// the first differing byte is).
#ifndef LOOM_SERVER_BEARER_AUTH_H_
#define LOOM_SERVER_BEARER_AUTH_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom {

// Equality of a and b in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class BearerAuth {
 public:
  // No token: every call is allowed.
  BearerAuth() = default;
  explicit BearerAuth(std::string token) : token_(std::move(token)) {}

  // Reads a token file (surrounding whitespace removed). NotFound if unreadable,
  // InvalidArgument if empty.
  static absl::StatusOr<BearerAuth> FromFile(const std::string& path);

  bool required() const { return !token_.empty(); }
  // `header`: the value of the authorization metadata ("" when absent). OK when no token
  // is required or it matches; Unauthenticated otherwise (never echoes the token).
  absl::Status Check(std::string_view header) const;

 private:
  std::string token_;
};

}  // namespace loom

#endif  // LOOM_SERVER_BEARER_AUTH_H_
