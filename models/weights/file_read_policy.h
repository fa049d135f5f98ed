// FileReadPolicy: which files a reader may open and how large they may be. A loader that
// parses files other people wrote (adapters under the server's adapter roots) opens every
// file through OpenFileForRead, which checks the file it actually OPENED, not the path it
// was given: symlinks (in any component) that lead outside the roots are refused after
// open, from the descriptor's real path, so there is no window between check and use.
#ifndef LOOM_MODELS_WEIGHTS_FILE_READ_POLICY_H_
#define LOOM_MODELS_WEIGHTS_FILE_READ_POLICY_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace loom {

struct FileReadPolicy {
  // Real (absolute, symlink-free) directories every opened file must lie under; empty =
  // anywhere (a base model the operator named).
  std::vector<std::string> roots;
  // Files larger than this are refused before anything is mapped or parsed.
  uint64_t max_bytes = std::numeric_limits<uint64_t>::max();

  // True when `real_path` is a root or lies under one (always, with no roots).
  bool Allows(absl::string_view real_path) const;
};

// An open read-only descriptor; closes on destruction. Move-only.
class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ReadOnlyFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  ReadOnlyFile(ReadOnlyFile&& o) noexcept : fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }
  ReadOnlyFile& operator=(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  int fd() const { return fd_; }
  // Gives up ownership of the descriptor (returned; -1 afterwards).
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Opens `path` read-only without blocking (a FIFO or device never stalls the caller) and
// checks the opened file:
//   NotFound            nothing at `path`
//   PermissionDenied    cannot be opened, or its real path is outside policy.roots (the
//                       message names `path`, never where it leads)
//   FailedPrecondition  not a regular file
//   ResourceExhausted   larger than policy.max_bytes (size and limit named)
absl::StatusOr<ReadOnlyFile> OpenFileForRead(const std::string& path,
                                             const FileReadPolicy& policy);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_FILE_READ_POLICY_H_
