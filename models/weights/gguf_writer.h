// Builds GGUF files (v2 or v3, little-endian): metadata in insertion order, tensors laid
// out in insertion order at `alignment`-aligned offsets. Used by tests to make tiny
// models and hostile variants, and by tools that write GGUF-LoRA adapters.
#ifndef LOOM_MODELS_WEIGHTS_GGUF_WRITER_H_
#define LOOM_MODELS_WEIGHTS_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/dtype.h"
#include "models/weights/gguf_file.h"

namespace loom {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // Metadata. Keys are written in call order; duplicates are written as given (so tests
  // can make hostile files).
  void AddValue(const std::string& key, GgufValue value);
  void AddString(const std::string& key, const std::string& v);
  void AddU32(const std::string& key, uint32_t v);
  void AddI32(const std::string& key, int32_t v);
  void AddU64(const std::string& key, uint64_t v);
  void AddF32(const std::string& key, float v);
  void AddBool(const std::string& key, bool v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddI32Array(const std::string& key, const std::vector<int32_t>& v);
  void AddF32Array(const std::string& key, const std::vector<float>& v);
  // Sets the data alignment and writes general.alignment (u32). REQUIRES: power of two.
  void SetAlignment(uint32_t alignment);

  // A tensor with row-major `shape` (written as ne = shape reversed) whose bytes are
  // `bytes`. InvalidArgument if the byte count does not match shape and dtype.
  absl::Status AddTensor(const std::string& name, DType dtype,
                         const std::vector<int64_t>& shape, std::string bytes);
  // Convenience: an F32 tensor from floats.
  absl::Status AddF32Tensor(const std::string& name, const std::vector<int64_t>& shape,
                            const std::vector<float>& values);

  // The whole file.
  std::string Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    int32_t ggml_type;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  uint32_t version_;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_GGUF_WRITER_H_
