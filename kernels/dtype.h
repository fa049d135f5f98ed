// Element types of weight tensors and their block layouts (ggml-compatible).
#ifndef LOOM_KERNELS_DTYPE_H_
#define LOOM_KERNELS_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom {

// Weight element types Loom can hold in memory and compute on directly.
// Quantized types are stored in blocks along the contiguous (last) dimension:
//   kQ8_0: 32 values in 34 bytes {fp16 d; int8 qs[32]}            y = qs * d
//   kQ4_0: 32 values in 18 bytes {fp16 d; uint8 qs[16]}           y = (nib - 8) * d
//   kQ4_1: 32 values in 20 bytes {fp16 d; fp16 m; uint8 qs[16]}   y = nib * d + m
// where nib for element j < 16 is qs[j] & 0xF and for j >= 16 is qs[j - 16] >> 4.
enum class DType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_1 };

inline constexpr int kQuantBlock = 32;

struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[16]; };
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);

std::string_view DTypeName(DType t);

// Elements per storage block (1 for float types, 32 for quantized ones).
int DTypeBlockElems(DType t);
// Bytes per storage block.
int DTypeBlockBytes(DType t);
inline bool DTypeIsQuantized(DType t) { return DTypeBlockElems(t) > 1; }

// Bytes of a row of `n` elements; nullopt if n is not a multiple of the block size
// or the product overflows.
std::optional<size_t> DTypeRowBytes(DType t, int64_t n);

// IEEE half / bfloat16 <-> float.
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);
inline float Bf16ToFp32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
uint16_t Fp32ToBf16(float f);  // round to nearest even

// Dequantizes one row of `n` elements of type `t` at `src` into `dst` (n floats).
// REQUIRES: n is a multiple of DTypeBlockElems(t).
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

}  // namespace loom

#endif  // LOOM_KERNELS_DTYPE_H_
