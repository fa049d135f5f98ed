// Writes a .safetensors file: tensors in the given order, header padded with spaces to a
// multiple of 8 bytes so every tensor starts 8-byte aligned in the file.
#ifndef LOOM_MODELS_WEIGHTS_SAFETENSORS_WRITER_H_
#define LOOM_MODELS_WEIGHTS_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace loom {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;       // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;   // row-major
  std::string bytes;            // shape product * dtype size bytes
};

// The file's bytes. InvalidArgument if an entry's byte count does not match its shape.
absl::Status SerializeSafetensors(const std::vector<SafetensorsEntry>& entries,
                                  const std::map<std::string, std::string>& metadata,
                                  std::string* out);

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata);

// Writes `contents` to `path` (truncating).
absl::Status WriteStringToFile(const std::string& path, const std::string& contents);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_SAFETENSORS_WRITER_H_
