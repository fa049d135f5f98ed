// Converts one stored adapter matrix (F32/F16/BF16, or Q8_0 row-major) into the BF16
// [rows, cols] layout LoraAdapter holds, optionally reading it transposed and with a row
// permutation, refusing non-finite values.
#ifndef LOOM_MODELS_LORA_LORA_TENSOR_COPY_H_
#define LOOM_MODELS_LORA_LORA_TENSOR_COPY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "kernels/dtype.h"

namespace loom {

struct StoredMatrix {
  std::string name;              // for error messages: "<file>: tensor '<name>'"
  DType dtype = DType::kF32;     // kF32, kF16, kBF16 (any layout) or kQ8_0 (not transposed)
  const uint8_t* data = nullptr;
  bool transposed = false;       // stored as [cols, rows] instead of [rows, cols]
};

// dst[r, c] = BF16(src[src_row(r), c]) for r < rows, c < cols; src_row = identity when
// empty. FailedPrecondition naming the tensor and element on NaN/Inf (or a finite value
// that rounds to Inf in BF16); REQUIRES: the source
// holds rows*cols elements (checked by the caller).
absl::Status CopyToBf16(const StoredMatrix& src, int64_t rows, int64_t cols,
                        const std::function<int64_t(int64_t)>& src_row, uint16_t* dst);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_LORA_TENSOR_COPY_H_
