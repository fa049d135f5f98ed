#include "models/weights/safetensors_writer.h"

#include <fstream>

#include "absl/strings/str_format.h"
#include "models/weights/safetensors_file.h"
#include "nlohmann/json.hpp"

namespace loom {

namespace {

// The 8-byte length plus the padded JSON header.
absl::Status BuildHeader(const std::vector<SafetensorsEntry>& entries,
                         const std::map<std::string, std::string>& metadata, std::string* out) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    uint64_t elems = 1;
    for (int64_t d : e.shape) elems *= static_cast<uint64_t>(d);
    const size_t esize = SafetensorsDTypeSize(e.dtype_name);
    if (esize == 0 || elems * esize != e.bytes.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "safetensors entry '%s': %d bytes do not match its %s shape", e.name, e.bytes.size(),
          e.dtype_name));
    }
    header[e.name] = {{"dtype", e.dtype_name},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string h = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  h.resize((h.size() + 7) / 8 * 8, ' ');
  const uint64_t n = h.size();
  out->assign(reinterpret_cast<const char*>(&n), 8);
  out->append(h);
  return absl::OkStatus();
}

}  // namespace

absl::Status SerializeSafetensors(const std::vector<SafetensorsEntry>& entries,
                                  const std::map<std::string, std::string>& metadata,
                                  std::string* out) {
  if (absl::Status s = BuildHeader(entries, metadata, out); !s.ok()) return s;
  for (const SafetensorsEntry& e : entries) out->append(e.bytes);
  return absl::OkStatus();
}

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata) {
  std::string header;
  if (absl::Status s = BuildHeader(entries, metadata, &header); !s.ok()) return s;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError("cannot create " + path);
  f.write(header.data(), header.size());
  for (const SafetensorsEntry& e : entries) f.write(e.bytes.data(), e.bytes.size());
  f.close();
  if (!f) return absl::DataLossError("cannot write " + path);
  return absl::OkStatus();
}

absl::Status WriteStringToFile(const std::string& path, const std::string& contents) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError("cannot create " + path);
  f.write(contents.data(), contents.size());
  f.close();
  if (!f) return absl::DataLossError("cannot write " + path);
  return absl::OkStatus();
}

}  // namespace loom
