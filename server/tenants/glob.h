// Glob patterns for the adapters a tenant may use (api_keys.h): literal bytes and '*'
// (any run of bytes, possibly empty). "acme-*" matches "acme-" and "acme-chat"; "*"
// matches everything; a pattern without '*' matches only itself.
//
// Linear time: the pattern is split at its stars, the first piece must be a prefix, the
// last a suffix, and each middle piece is found leftmost with Knuth-Morris-Pratt, so a
// match costs O(pattern + text) whatever either holds. Untrusted text (an adapter id from
// a request) never reaches a backtracking matcher.
#ifndef LOOM_SERVER_TENANTS_GLOB_H_
#define LOOM_SERVER_TENANTS_GLOB_H_

#include <string_view>

namespace loom {

bool GlobMatch(std::string_view pattern, std::string_view text);

}  // namespace loom

#endif  // LOOM_SERVER_TENANTS_GLOB_H_
