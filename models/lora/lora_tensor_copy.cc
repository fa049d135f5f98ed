#include "models/lora/lora_tensor_copy.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"

namespace loom {
namespace {

inline float LoadElem(DType t, const uint8_t* base, int64_t idx) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, base + idx * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, base + idx * 2, 2);
  return t == DType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
}

}  // namespace

absl::Status CopyToBf16(const StoredMatrix& src, int64_t rows, int64_t cols,
                        const std::function<int64_t(int64_t)>& src_row, uint16_t* dst) {
  const bool quant = src.dtype == DType::kQ8_0;
  if (src.dtype != DType::kF32 && src.dtype != DType::kF16 && src.dtype != DType::kBF16 &&
      !quant) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: type %s is not supported for adapter weights (F32, F16, BF16, Q8_0)", src.name,
        std::string(DTypeName(src.dtype))));
  }
  if (quant && (src.transposed || cols % kQuantBlock != 0)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: Q8_0 adapter weights need a row length divisible by 32 (got %d)", src.name, cols));
  }
  std::vector<float> row(quant ? cols : 0);
  const size_t qrow_bytes = quant ? static_cast<size_t>(cols / kQuantBlock) * sizeof(BlockQ8_0) : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t sr = src_row ? src_row(r) : r;
    if (quant) DequantizeRow(DType::kQ8_0, src.data + sr * qrow_bytes, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      const float v = quant            ? row[c]
                      : src.transposed ? LoadElem(src.dtype, src.data, c * rows + sr)
                                       : LoadElem(src.dtype, src.data, sr * cols + c);
      const uint16_t bf16 = Fp32ToBf16(v);
      if (!std::isfinite(Bf16ToFp32(bf16))) {  // also finite F32 values that round to inf
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: non-finite value %g (in BF16) at row %d, column %d", src.name, v, sr, c));
      }
      dst[r * cols + c] = bf16;
    }
  }
  return absl::OkStatus();
}

}  // namespace loom
