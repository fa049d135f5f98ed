#include "server/adapter_roots.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/weights/untrusted_text.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

bool Exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

absl::StatusOr<std::string> RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrFormat("adapter path %s does not exist", QuoteUntrusted(p)));
    }
    return absl::PermissionDeniedError(absl::StrFormat(
        "adapter path %s cannot be resolved: %s", QuoteUntrusted(p), std::strerror(err)));
  }
  return std::string(buf);
}

std::string Normal(const fs::path& p) {
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

absl::Status ValidateAdapterId(std::string_view id) {
  bool ok = !id.empty() && id.size() <= 128 && id[0] != '.';
  for (char c : id) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    ok = ok && allowed;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "adapter id %s is invalid: 1-128 characters from [A-Za-z0-9._-], not starting "
      "with '.'",
      QuoteUntrusted(absl::string_view(id.data(), id.size()))));
}

absl::StatusOr<AdapterRoots> AdapterRoots::Create(const std::vector<std::string>& roots) {
  std::vector<std::string> real;
  for (const std::string& r : roots) {
    if (r.empty()) return absl::InvalidArgumentError("an adapter root is empty");
    absl::StatusOr<std::string> rp = RealPath(r);
    if (!rp.ok()) {
      return absl::NotFoundError(absl::StrFormat("adapter root '%s' does not exist", r));
    }
    struct stat st;
    if (::stat(rp->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("adapter root '%s' is not a directory", r));
    }
    real.push_back(*rp);
  }
  return AdapterRoots(std::move(real));
}

bool AdapterRoots::UnderARoot(const std::string& path) const {
  for (const std::string& root : roots_) {
    if (root == "/" || path == root || absl::StartsWith(path, root + "/")) return true;
  }
  return false;
}

absl::StatusOr<std::string> AdapterRoots::Check(const std::string& requested,
                                                const std::string& candidate) const {
  absl::StatusOr<std::string> real = RealPath(candidate);
  if (!real.ok()) return real.status();
  if (!UnderARoot(*real)) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "adapter path %s resolves outside the adapter roots [%s]", QuoteUntrusted(requested),
        absl::StrJoin(roots_, ", ")));
  }
  return real;
}

absl::StatusOr<std::string> AdapterRoots::Resolve(const std::string& source) const {
  if (source.empty()) return absl::InvalidArgumentError("adapter source path is empty");
  if (roots_.empty()) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "adapter path %s refused: no adapter roots are configured (--adapter_roots)",
        QuoteUntrusted(source)));
  }
  const fs::path p(source);
  if (p.is_absolute()) {
    const std::string n = Normal(p);
    if (!UnderARoot(n)) {
      return absl::PermissionDeniedError(absl::StrFormat(
          "adapter path %s is outside the adapter roots [%s]", QuoteUntrusted(source),
          absl::StrJoin(roots_, ", ")));
    }
    return Check(source, n);
  }
  bool any_inside = false;
  for (const std::string& root : roots_) {
    const std::string n = Normal(fs::path(root) / p);
    if (!(root == "/" || n == root || absl::StartsWith(n, root + "/"))) continue;
    any_inside = true;
    if (Exists(n)) return Check(source, n);
  }
  if (!any_inside) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "adapter path %s escapes the adapter roots [%s]", QuoteUntrusted(source),
        absl::StrJoin(roots_, ", ")));
  }
  return absl::NotFoundError(absl::StrFormat("adapter path %s not found under [%s]",
                                             QuoteUntrusted(source),
                                             absl::StrJoin(roots_, ", ")));
}

absl::StatusOr<std::string> AdapterRoots::FindById(const std::string& id) const {
  if (absl::Status s = ValidateAdapterId(id); !s.ok()) return s;
  for (const std::string& root : roots_) {
    for (const std::string& name : {id, id + ".gguf"}) {
      const std::string candidate = root + (root == "/" ? "" : "/") + name;
      if (Exists(candidate)) return Check(name, candidate);
    }
  }
  return absl::NotFoundError(absl::StrFormat(
      "adapter '%s' not found: not loaded, and no '%s' or '%s.gguf' under the adapter "
      "roots [%s]",
      id, id, id, absl::StrJoin(roots_, ", ")));
}

}  // namespace loom
