#include "models/testing/dequantized_model.h"

#include <vector>

#include "kernels/dtype.h"

namespace loom::testing {

std::unique_ptr<ModelSource> DequantizedCopy(const ModelSource& q) {
  auto s = std::make_unique<ModelSource>();
  s->path_ = q.path() + " (dequantized to F32)";
  s->config_ = q.config();
  s->vocab_ = q.vocabulary();
  for (const auto& [name, t] : q.tensors()) {
    const int64_t rows = t.rows(), cols = t.cols();
    std::vector<uint8_t> buf(static_cast<size_t>(rows * cols) * sizeof(float));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t.dtype, t.data + r * t.row_bytes(),
                    reinterpret_cast<float*>(buf.data()) + r * cols, cols);
    }
    WeightTensor w = t;
    w.dtype = DType::kF32;
    w.data = buf.data();
    w.nbytes = buf.size();
    s->owned_.push_back(std::move(buf));
    s->tensors_[name] = w;
  }
  return s;
}

}  // namespace loom::testing
