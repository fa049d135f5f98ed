// ApiKeys: the inference keys file (loomd --api_keys_file), mapping each API key to a
// tenant with the adapters it may use and an optional token rate:
//
//   {"tenants": {
//      "acme":  {"keys": ["sk-acme-1", "sk-acme-2"], "adapters": ["acme-*"],
//                "tokens_per_minute": 20000},
//      "admin": {"keys": ["sk-ops"]}}}
//
// "adapters": glob patterns (glob.h); absent = every adapter; the base model is always
// allowed. "tokens_per_minute": prompt + generated tokens; absent or 0 = unlimited.
// Tenant names are 1-64 characters of [A-Za-z0-9._-] (they become metric labels); keys
// are 8-256 printable ASCII characters, each used once in the file.
// Immutable after Parse; thread-safe to read.
#ifndef LOOM_SERVER_TENANTS_API_KEYS_H_
#define LOOM_SERVER_TENANTS_API_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace loom {

struct TenantPolicy {
  std::string name;
  std::vector<std::string> adapters;  // glob patterns; empty = all
  int64_t tokens_per_minute = 0;      // 0 = unlimited

  // True for the base model ("") and any adapter a pattern matches.
  bool AllowsAdapter(std::string_view adapter_id) const;
};

class ApiKeys {
 public:
  // The files this reads are bounded before parsing.
  static constexpr size_t kMaxFileBytes = 1 << 20;

  // InvalidArgument naming the tenant / field for a malformed document.
  static absl::StatusOr<ApiKeys> Parse(std::string_view json);
  // Reads and parses `path`: NotFound if unreadable, InvalidArgument if larger than
  // kMaxFileBytes or malformed (the message starts with the path).
  static absl::StatusOr<ApiKeys> Load(const std::string& path);

  // The tenant of `key`, or null.
  const TenantPolicy* Find(std::string_view key) const;
  const std::vector<TenantPolicy>& tenants() const { return tenants_; }
  size_t key_count() const { return tenant_of_key_.size(); }

 private:
  std::vector<TenantPolicy> tenants_;
  absl::flat_hash_map<std::string, size_t> tenant_of_key_;  // key -> index in tenants_
};

}  // namespace loom

#endif  // LOOM_SERVER_TENANTS_API_KEYS_H_
