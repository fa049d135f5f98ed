// Parser of the GGUF container (versions 2 and 3, little-endian): metadata key/values and
// tensor infos, bounds-checked over a memory-mapped file. Model semantics (llama keys,
// expected tensors) live in gguf_reader.h; this layer only knows the container.
#ifndef LOOM_MODELS_WEIGHTS_GGUF_FILE_H_
#define LOOM_MODELS_WEIGHTS_GGUF_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"
#include "models/weights/model_source.h"

namespace loom {

// GGUF metadata value types (gguf_type).
enum class GgufType : int32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* GgufTypeName(GgufType t);

// ggml tensor type ids this reader maps to a DType.
inline constexpr int32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3,
                         kGgmlQ8_0 = 8, kGgmlBF16 = 30;
// The ggml id of `t` (inverse of the mapping the reader uses).
int32_t GgmlTypeId(DType t);

// One metadata value. Integers of every width are held in `i` (unsigned 64-bit values
// above INT64_MAX keep their bits; `type` says how to read them), floats in `f`.
//
// Arrays have two forms. Built in memory (GgufWriter's input): `items`. Read from a file:
// `items` stays empty and the array is a view of its encoded elements in the file's
// mapping (`array_size` elements in `array_bytes`, checked when the file was parsed), so a
// 20 MiB array costs no memory until someone decodes it (DecodeGgufArray, the typed array
// getters). Views are valid while their GgufFile lives.
struct GgufValue {
  GgufType type = GgufType::kU8;
  int64_t i = 0;
  double f = 0.0;
  bool b = false;
  std::string s;
  GgufType elem_type = GgufType::kU8;  // for kArray
  std::vector<GgufValue> items;        // for kArray built in memory
  uint64_t array_size = 0;             // for kArray read from a file
  std::string_view array_bytes;        // for kArray read from a file

  bool is_integer() const;
  bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
  // Element count of an array of either form.
  uint64_t size() const { return items.empty() ? array_size : items.size(); }
};

// The elements of an array value (either form; nested arrays stay views).
// InvalidArgument if `array` is not an array or its bytes do not decode.
absl::StatusOr<std::vector<GgufValue>> DecodeGgufArray(const GgufValue& array);

// Bounds on what one file may declare, checked before anything is allocated for it. Real
// models have under 100 metadata keys and under 2,000 tensors.
inline constexpr uint64_t kMaxGgufMetadataKeys = uint64_t{1} << 16;
inline constexpr uint64_t kMaxGgufTensors = uint64_t{1} << 16;

struct GgufTensorInfo {
  std::string name;
  int32_t ggml_type = 0;
  DType dtype = DType::kF32;
  std::vector<int64_t> ne;     // as stored: ne[0] is the contiguous dimension
  std::vector<int64_t> shape;  // row-major, outermost first (ne reversed)
  uint64_t offset = 0;         // relative to the data section
  size_t nbytes = 0;
};

class GgufFile {
 public:
  // Maps and parses `path` (opened through MappedFile::Open(path, policy)). Every
  // structural problem is InvalidArgument (or Unimplemented for a tensor type this reader
  // does not support) naming the file and the problem; names from the file are echoed
  // bounded (QuoteUntrusted). Memory held per file byte is bounded: arrays are views,
  // keys and tensors are capped above.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path,
                                                        const FileReadPolicy& policy = {});
  // Parses an already mapped file (takes ownership).
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::unique_ptr<MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }
  const MappedFile& file() const { return *file_; }
  std::unique_ptr<MappedFile> ReleaseFile() { return std::move(file_); }

  // Start of a tensor's bytes (in the mapping).
  const uint8_t* TensorData(const GgufTensorInfo& t) const {
    return file_->data() + data_offset_ + t.offset;
  }

  bool Has(const std::string& key) const { return kv_.count(key) != 0; }
  // Typed getters: NotFound if the key is missing, InvalidArgument if it has another type
  // or its value does not fit. GetInt accepts any integer type; GetFloat any number.
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<int32_t> GetInt32(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;
  absl::StatusOr<bool> GetBool(const std::string& key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(const std::string& key) const;
  // The raw value, or nullptr.
  const GgufValue* Find(const std::string& key) const;

 private:
  explicit GgufFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}
  absl::Status ParseAll();
  absl::StatusOr<const GgufValue*> Lookup(const std::string& key) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_GGUF_FILE_H_
