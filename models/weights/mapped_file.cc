// MappedFile: a read-only mmap of a whole file.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/weights/model_source.h"

namespace loom {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path,
                                                             const FileReadPolicy& policy) {
  absl::StatusOr<ReadOnlyFile> file = OpenFileForRead(path, policy);
  if (!file.ok()) {
    if (absl::IsFailedPrecondition(file.status())) {
      return absl::InvalidArgumentError(file.status().message());
    }
    return file.status();
  }
  const size_t size = static_cast<size_t>(file->size());
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file->fd(), 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot mmap ", path, " (", size, " bytes): ", std::strerror(e)));
    }
    data = static_cast<const uint8_t*>(p);
  }
  // The descriptor closes here; the mapping keeps the file alive.
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace loom
