#include "server/tenants/api_keys.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "server/tenants/glob.h"

namespace loom {
namespace {

using nlohmann::json;

constexpr size_t kMaxPatternBytes = 256;
constexpr size_t kMaxPatterns = 1024;

absl::Status Bad(const std::string& where, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("keys file: ", where, ": ", why));
}

bool ValidTenantName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool ValidKey(const std::string& key) {
  if (key.size() < 8 || key.size() > 256) return false;
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

absl::StatusOr<TenantPolicy> ParseTenant(const std::string& name, const json& t,
                                         std::vector<std::string>* keys) {
  const std::string where = absl::StrCat("tenant '", name, "'");
  if (!ValidTenantName(name)) {
    return Bad(where, "a tenant name is 1-64 characters of [A-Za-z0-9._-]");
  }
  if (!t.is_object()) return Bad(where, "must be an object");
  TenantPolicy p;
  p.name = name;
  for (auto it = t.begin(); it != t.end(); ++it) {
    const std::string& field = it.key();
    const json& v = it.value();
    if (field == "keys") {
      if (!v.is_array() || v.empty()) return Bad(where, "\"keys\" must be a non-empty array");
      for (const json& k : v) {
        if (!k.is_string() || !ValidKey(k.get<std::string>())) {
          return Bad(where, "each key is a string of 8-256 printable ASCII characters");
        }
        keys->push_back(k.get<std::string>());
      }
    } else if (field == "adapters") {
      if (!v.is_array() || v.size() > kMaxPatterns) {
        return Bad(where, absl::StrFormat("\"adapters\" must be an array of at most %d glob "
                                          "patterns",
                                          kMaxPatterns));
      }
      for (const json& a : v) {
        if (!a.is_string() || a.get<std::string>().empty() ||
            a.get<std::string>().size() > kMaxPatternBytes) {
          return Bad(where, "each adapter pattern is a non-empty string of at most 256 bytes");
        }
        p.adapters.push_back(a.get<std::string>());
      }
    } else if (field == "tokens_per_minute") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        return Bad(where, "\"tokens_per_minute\" must be an integer >= 0");
      }
      p.tokens_per_minute = v.get<int64_t>();
    } else {
      return Bad(where, absl::StrCat("unknown field \"", field,
                                     "\" (expected keys, adapters, tokens_per_minute)"));
    }
  }
  if (keys->empty()) return Bad(where, "\"keys\" is required");
  return p;
}

}  // namespace

bool TenantPolicy::AllowsAdapter(std::string_view adapter_id) const {
  if (adapter_id.empty() || adapters.empty()) return true;
  for (const std::string& pattern : adapters) {
    if (GlobMatch(pattern, adapter_id)) return true;
  }
  return false;
}

absl::StatusOr<ApiKeys> ApiKeys::Parse(std::string_view text) {
  if (text.size() > kMaxFileBytes) {
    return Bad("document", absl::StrFormat("larger than %d bytes", kMaxFileBytes));
  }
  // nlohmann's parser is recursive: bound the nesting before handing it the text.
  int depth = 0, max_depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    if (c == ']' || c == '}') --depth;
  }
  if (max_depth > 16) return Bad("document", "nested too deeply");
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("document", "not a JSON object");
  if (doc.size() != 1 || !doc.contains("tenants") || !doc["tenants"].is_object()) {
    return Bad("document", "expected {\"tenants\": {NAME: {...}, ...}}");
  }
  ApiKeys out;
  for (auto it = doc["tenants"].begin(); it != doc["tenants"].end(); ++it) {
    std::vector<std::string> keys;
    absl::StatusOr<TenantPolicy> p = ParseTenant(it.key(), it.value(), &keys);
    if (!p.ok()) return p.status();
    for (std::string& k : keys) {
      // Named by its tenant, never by the key itself (logs are not for secrets).
      if (!out.tenant_of_key_.emplace(std::move(k), out.tenants_.size()).second) {
        return Bad(absl::StrCat("tenant '", it.key(), "'"), "a key is used twice in the file");
      }
    }
    out.tenants_.push_back(*std::move(p));
  }
  return out;
}

absl::StatusOr<ApiKeys> ApiKeys::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot read keys file '%s'", path));
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  absl::StatusOr<ApiKeys> keys = Parse(text);
  if (!keys.ok()) {
    return absl::Status(keys.status().code(), absl::StrCat(path, ": ", keys.status().message()));
  }
  return keys;
}

const TenantPolicy* ApiKeys::Find(std::string_view key) const {
  auto it = tenant_of_key_.find(absl::string_view(key.data(), key.size()));
  return it == tenant_of_key_.end() ? nullptr : &tenants_[it->second];
}

}  // namespace loom
