// Small file helpers for the readers: bounded whole-file reads and JSON parsing into
// Statuses, with the nesting depth bounded before parsing.
#ifndef LOOM_MODELS_WEIGHTS_JSON_FILE_H_
#define LOOM_MODELS_WEIGHTS_JSON_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/weights/file_read_policy.h"
#include "nlohmann/json.hpp"

namespace loom {

// Deepest JSON nesting (arrays and objects) the parsers accept. Real config, tokenizer and
// safetensors headers nest at most 6 deep; this bound keeps every recursive walk over a
// parsed document (dump, comparison, copy) far from the stack's end.
inline constexpr int kMaxJsonDepth = 64;

bool FileExists(const std::string& path);
// NotFound if missing; ResourceExhausted if larger than `max_bytes` (or policy.max_bytes);
// the other errors of OpenFileForRead(path, policy).
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes = size_t{1} << 30,
                                             const FileReadPolicy& policy = {});
// The deepest array/object nesting in `text` (a linear scan that skips strings; it does
// not validate the rest of the JSON).
int JsonNestingDepth(absl::string_view text);
// `text` parsed; InvalidArgument "<where>: ..." when it is not JSON or nests deeper than
// `max_depth` (checked before parsing).
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, const std::string& where,
                                         int max_depth = kMaxJsonDepth);
absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(absl::string_view text,
                                                        const std::string& where,
                                                        int max_depth = kMaxJsonDepth);
// NotFound if missing; InvalidArgument naming the file if not JSON, nested deeper than
// kMaxJsonDepth, or not an object.
absl::StatusOr<nlohmann::json> ReadJsonObject(const std::string& path);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_JSON_FILE_H_
