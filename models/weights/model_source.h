// One description of a model on disk, whatever its format (GGUF file or HF directory):
// architecture numbers, tokenizer data, and views of the weight tensors in their stored
// types. The tensors stay where the format put them (memory-mapped), so quantized weights
// stay quantized.
#ifndef LOOM_MODELS_WEIGHTS_MODEL_SOURCE_H_
#define LOOM_MODELS_WEIGHTS_MODEL_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"
#include "models/model_config.h"
#include "models/tokenizer/vocabulary.h"
#include "models/weights/file_read_policy.h"

namespace loom {

// A weight tensor in its stored type. `shape` is row-major, outermost first: a linear
// layer is [out, in] (GGUF's ne reversed), a norm is [hidden]. The last dimension is
// contiguous and, for quantized types, a multiple of 32.
struct WeightTensor {
  std::string name;             // canonical GGUF-style name, e.g. "blk.3.attn_q.weight"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // valid while the owning ModelSource lives
  size_t nbytes = 0;

  int64_t rows() const;   // product of all but the last dimension (1 for 1-D)
  int64_t cols() const;   // last dimension
  size_t row_bytes() const { return rows() == 0 ? 0 : nbytes / rows(); }
};

// Read-only memory mapping of a whole file.
class MappedFile {
 public:
  // Opens `path` through OpenFileForRead(path, policy) (its errors; InvalidArgument for
  // something that is not a regular file) and maps it.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                          const FileReadPolicy& policy = {});
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

class ModelSource {
 public:
  // Opens a GGUF file or a Hugging Face directory (config.json + *.safetensors +
  // tokenizer.json or tokenizer.model), chosen by what `path` is.
  static absl::StatusOr<std::unique_ptr<ModelSource>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const LlamaConfig& config() const { return config_; }
  const Vocabulary& vocabulary() const { return vocab_; }
  const std::map<std::string, WeightTensor>& tensors() const { return tensors_; }

  // The tensor called `name`, or NotFound naming the file and the tensor.
  absl::StatusOr<const WeightTensor*> Tensor(const std::string& name) const;

  // Filled by the format readers (GgufReader, HfDirectoryReader).
  std::string path_;
  LlamaConfig config_;
  Vocabulary vocab_;
  std::map<std::string, WeightTensor> tensors_;
  std::vector<std::unique_ptr<MappedFile>> files_;  // keep tensor memory alive
  std::vector<std::vector<uint8_t>> owned_;         // tensors converted at load time
};

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_MODEL_SOURCE_H_
