#include "models/weights/json_file.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace loom {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrFormat("%s: no such file", path));
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d bytes is over the %d byte limit", path, st.st_size, max_bytes));
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::PermissionDeniedError(absl::StrFormat("%s: cannot open", path));
  std::string s(static_cast<size_t>(st.st_size), '\0');
  f.read(s.data(), s.size());
  if (static_cast<size_t>(f.gcount()) != s.size()) {
    return absl::DataLossError(absl::StrFormat("%s: short read", path));
  }
  return s;
}

absl::StatusOr<nlohmann::json> ReadJsonObject(const std::string& path) {
  auto text = ReadFileToString(path, size_t{256} << 20);
  if (!text.ok()) return text.status();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON", path));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: not a JSON object", path));
  }
  return j;
}

}  // namespace loom
