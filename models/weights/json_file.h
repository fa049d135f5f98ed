// Small file helpers for the HF reader: whole-file reads and JSON parsing into Statuses.
#ifndef LOOM_MODELS_WEIGHTS_JSON_FILE_H_
#define LOOM_MODELS_WEIGHTS_JSON_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace loom {

bool FileExists(const std::string& path);
// NotFound if missing; ResourceExhausted if larger than `max_bytes`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes = size_t{1} << 30);
// NotFound if missing; InvalidArgument naming the file if not JSON or not an object.
absl::StatusOr<nlohmann::json> ReadJsonObject(const std::string& path);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_JSON_FILE_H_
