#include "models/weights/json_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace loom {
namespace {

template <typename J>
absl::StatusOr<J> ParseBounded(absl::string_view text, const std::string& where,
                               int max_depth) {
  if (const int depth = JsonNestingDepth(text); depth > max_depth) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: JSON nested %d deep, more than the %d accepted", where, depth, max_depth));
  }
  J j = J::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON", where));
  }
  return j;
}

}  // namespace

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes,
                                             const FileReadPolicy& policy) {
  FileReadPolicy bounded = policy;
  bounded.max_bytes = std::min<uint64_t>(policy.max_bytes, max_bytes);
  absl::StatusOr<ReadOnlyFile> file = OpenFileForRead(path, bounded);
  if (!file.ok()) {
    if (absl::IsFailedPrecondition(file.status())) {
      return absl::NotFoundError(absl::StrFormat("%s: no such file", path));
    }
    return file.status();
  }
  std::string s(static_cast<size_t>(file->size()), '\0');
  size_t got = 0;
  while (got < s.size()) {
    const ssize_t n = ::read(file->fd(), s.data() + got, s.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got != s.size()) return absl::DataLossError(absl::StrFormat("%s: short read", path));
  return s;
}

int JsonNestingDepth(absl::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, const std::string& where,
                                         int max_depth) {
  return ParseBounded<nlohmann::json>(text, where, max_depth);
}

absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(absl::string_view text,
                                                        const std::string& where,
                                                        int max_depth) {
  return ParseBounded<nlohmann::ordered_json>(text, where, max_depth);
}

absl::StatusOr<nlohmann::json> ReadJsonObject(const std::string& path) {
  auto text = ReadFileToString(path, size_t{256} << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<nlohmann::json> j = ParseJson(*text, path);
  if (!j.ok()) return j.status();
  if (!j->is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: not a JSON object", path));
  }
  return j;
}

}  // namespace loom
