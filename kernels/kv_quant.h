// Encoding of one KV cache row (one token, one kv head: head_dim values) in each KvDtype
// (formats in backend.h). Every backend writes its rows through QuantizeKvRow, so the
// cache bytes of all backends agree exactly; attention kernels may decode with their own
// vector code but must give DequantizeKvRow's values.
#ifndef LOOM_KERNELS_KV_QUANT_H_
#define LOOM_KERNELS_KV_QUANT_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace loom::kernels {

// True when rows of `dtype` hold the rotated vector: quantized dtypes with a power-of-two
// head_dim (backend.h).
bool KvRowIsRotated(KvDtype dtype, int head_dim);

// x [head_dim] <- H x, H the Walsh-Hadamard matrix scaled by 1/sqrt(head_dim) (orthonormal
// and its own inverse): butterflies over strides 1, 2, 4, ... in order, then the scale.
// REQUIRES: head_dim a power of two.
void HadamardRotate(float* x, int head_dim);

// Writes x [head_dim] into row (KvLayout::row_bytes() bytes) in `dtype`: y = H x when
// KvRowIsRotated, else y = x; then
//   kF16: round to nearest even. kInt8: d = fp16(absmax(y) / 127), q = round(y / d)
//   clamped to [-127, 127]. kInt4: m = fp16(min(y)), d = fp16((max(y) - min(y)) / 15),
//   q = round((y - m) / d) clamped to [0, 15]. A zero d stores q = 0.
// REQUIRES: head_dim even for kInt4, head_dim <= 4096.
void QuantizeKvRow(KvDtype dtype, const float* x, int head_dim, uint8_t* row);

// out [head_dim] = the stored values (fp16 -> fp32; d * q; d * q + m, in float), rotated
// back (H applied again) when KvRowIsRotated: an approximation of the x written.
void DequantizeKvRow(KvDtype dtype, const uint8_t* row, int head_dim, float* out);

// out [head_dim] = the stored values as they are (the rotated domain when rotated).
void DecodeKvRowStored(KvDtype dtype, const uint8_t* row, int head_dim, float* out);

// "f16", "int8", "int4" (the names of the --kv_cache_dtype flags). InvalidArgument
// listing the accepted names otherwise.
absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name);
std::string_view KvDtypeName(KvDtype dtype);

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_KV_QUANT_H_
