// Parser of one .safetensors file: u64 LE header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the
// data (offsets relative to the end of the header). The file is memory-mapped; tensors
// point into the mapping.
#ifndef LOOM_MODELS_WEIGHTS_SAFETENSORS_FILE_H_
#define LOOM_MODELS_WEIGHTS_SAFETENSORS_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"
#include "models/weights/model_source.h"

namespace loom {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;       // as written: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;   // set for F32, F16, BF16 (the types Loom computes on)
  std::vector<int64_t> shape;   // row-major; empty for a scalar
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

// The format's own limit on the JSON header.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

struct SafetensorsReadOptions {
  FileReadPolicy files;  // which files may be opened, and how large
  uint64_t max_header_bytes = kMaxSafetensorsHeaderBytes;
};

class SafetensorsFile {
 public:
  // InvalidArgument naming the file for: header length past the end of the file or above
  // options.max_header_bytes, header not a JSON object or nested more than 4 deep, an entry
  // without a valid dtype/shape/data_offsets, offsets out of range, overlapping, or not
  // matching shape * dtype size; Unimplemented for a dtype name the format does not define;
  // the errors of MappedFile::Open(path, options.files). Names from the file are echoed
  // bounded (QuoteUntrusted).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path, const SafetensorsReadOptions& options = {});

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::unique_ptr<MappedFile> ReleaseFile() { return std::move(file_); }

 private:
  explicit SafetensorsFile(std::unique_ptr<MappedFile> f) : file_(std::move(f)) {}
  absl::Status Parse(uint64_t max_header_bytes);

  std::unique_ptr<MappedFile> file_;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Bytes per element of a safetensors dtype name, or 0 if the name is unknown.
size_t SafetensorsDTypeSize(const std::string& dtype_name);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_SAFETENSORS_FILE_H_
