#include "models/eval/f32_model_source.h"

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/dtype.h"

namespace loom {

absl::StatusOr<std::unique_ptr<ModelSource>> DequantizeToF32(const ModelSource& q) {
  auto s = std::make_unique<ModelSource>();
  s->path_ = q.path() + " (dequantized to F32)";
  s->config_ = q.config();
  s->vocab_ = q.vocabulary();
  for (const auto& [name, t] : q.tensors()) {
    const int64_t rows = t.rows(), cols = t.cols();
    const std::optional<size_t> row_bytes = DTypeRowBytes(t.dtype, cols);
    if (!row_bytes || *row_bytes * static_cast<size_t>(rows) != t.nbytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor %s has %d bytes, not %d rows of %d %s values", q.path(), name, t.nbytes,
          rows, cols, DTypeName(t.dtype)));
    }
    std::vector<uint8_t> buf(static_cast<size_t>(rows * cols) * sizeof(float));
    float* out = reinterpret_cast<float*>(buf.data());
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t.dtype, t.data + r * *row_bytes, out + r * cols, cols);
    }
    WeightTensor w = t;
    w.dtype = DType::kF32;
    w.data = buf.data();  // the heap buffer stays put when `buf` is moved into owned_
    w.nbytes = buf.size();
    s->owned_.push_back(std::move(buf));
    s->tensors_[name] = std::move(w);
  }
  return s;
}

}  // namespace loom
