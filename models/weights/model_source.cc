// ModelSource::Open: picks the reader by what the path is.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/weights/gguf_reader.h"
#include "models/weights/hf_directory_reader.h"
#include "models/weights/model_source.h"

namespace loom {

absl::StatusOr<std::unique_ptr<ModelSource>> ModelSource::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    const std::string msg = absl::StrCat("cannot open model ", path, ": ", std::strerror(e));
    return e == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  if (S_ISDIR(st.st_mode)) return ReadHfDirectory(path);
  if (S_ISREG(st.st_mode)) return ReadGgufModel(path);
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is neither a GGUF file nor a Hugging Face model directory"));
}

}  // namespace loom
