#include "models/weights/file_read_policy.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace loom {
namespace {

// The path the kernel holds for `fd` (what was opened, after every symlink).
absl::StatusOr<std::string> DescriptorPath(int fd) {
  char link[64];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char buf[PATH_MAX + 1];
  const ssize_t n = ::readlink(link, buf, PATH_MAX);
  if (n <= 0 || n >= PATH_MAX) {
    return absl::PermissionDeniedError(
        "cannot verify where an opened file lies (/proc/self/fd unreadable)");
  }
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

bool FileReadPolicy::Allows(absl::string_view real_path) const {
  if (roots.empty()) return true;
  for (const std::string& root : roots) {
    if (root == "/" || real_path == root ||
        (real_path.size() > root.size() && real_path.compare(0, root.size(), root) == 0 &&
         real_path[root.size()] == '/')) {
      return true;
    }
  }
  return false;
}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    o.fd_ = -1;
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<ReadOnlyFile> OpenFileForRead(const std::string& path,
                                             const FileReadPolicy& policy) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
      return absl::NotFoundError(absl::StrFormat("%s: no such file", path));
    }
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot open %s: %s", path, std::strerror(e)));
  }
  ReadOnlyFile file(fd, 0);
  if (!policy.roots.empty()) {
    absl::StatusOr<std::string> real = DescriptorPath(fd);
    if (!real.ok()) return real.status();
    if (!policy.Allows(*real)) {
      return absl::PermissionDeniedError(
          absl::StrFormat("%s resolves outside the directories it may be read from (a symlink out of them?)", path));
    }
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot stat %s: %s", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrFormat("%s is not a regular file", path));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > policy.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d bytes is over the %d byte limit for this file", path, size, policy.max_bytes));
  }
  // Regular files never block; clear O_NONBLOCK so reads behave as usual.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return ReadOnlyFile(file.Release(), size);
}

}  // namespace loom
