// AdapterRoots: the directories adapters may be loaded from, and the only way a requested
// adapter path becomes a path the server opens.
//
//   Resolve(source)  relative: tried under each root in order (the first that exists);
//                    absolute: must lie under a root. Lexically escaping a root ("..")
//                    is PermissionDenied before anything is looked up; then the real path
//                    (symlinks followed) must still lie under a root, else
//                    PermissionDenied. NotFound when nothing is there.
//   FindById(id)     on-demand loading: <root>/<id> (a PEFT directory) or <root>/<id>.gguf,
//                    first root first. NotFound when no root has it.
// With no roots every path is PermissionDenied. Immutable after Create; thread-safe.
#ifndef LOOM_SERVER_ADAPTER_ROOTS_H_
#define LOOM_SERVER_ADAPTER_ROOTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom {

// OK for 1-128 characters from [A-Za-z0-9._-] not starting with '.'; InvalidArgument
// naming the id otherwise.
absl::Status ValidateAdapterId(std::string_view id);

class AdapterRoots {
 public:
  // Each root must be an existing directory (NotFound / InvalidArgument naming it); it is
  // stored as its real path.
  static absl::StatusOr<AdapterRoots> Create(const std::vector<std::string>& roots);

  // The real path of `source`; see the file comment.
  absl::StatusOr<std::string> Resolve(const std::string& source) const;
  // The real path of the adapter called `id` under the roots; see the file comment.
  absl::StatusOr<std::string> FindById(const std::string& id) const;

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  explicit AdapterRoots(std::vector<std::string> roots) : roots_(std::move(roots)) {}
  // True when `path` (absolute, normalised) is a root or lies under one.
  bool UnderARoot(const std::string& path) const;
  // Real path of an existing candidate that lexically lies under a root.
  absl::StatusOr<std::string> Check(const std::string& requested,
                                    const std::string& candidate) const;

  std::vector<std::string> roots_;  // real paths, no trailing '/' (except "/")
};

}  // namespace loom

#endif  // LOOM_SERVER_ADAPTER_ROOTS_H_
