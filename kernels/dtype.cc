#include "kernels/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace loom {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kQ8_0: return "Q8_0";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_1: return "Q4_1";
  }
  return "?";
}

int DTypeBlockElems(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: return 1;
    default: return kQuantBlock;
  }
}

int DTypeBlockBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ4_0: return sizeof(BlockQ4_0);
    case DType::kQ4_1: return sizeof(BlockQ4_1);
  }
  return 0;
}

std::optional<size_t> DTypeRowBytes(DType t, int64_t n) {
  if (n < 0) return std::nullopt;
  const int64_t be = DTypeBlockElems(t);
  if (n % be != 0) return std::nullopt;
  const uint64_t blocks = static_cast<uint64_t>(n / be);
  const uint64_t bb = static_cast<uint64_t>(DTypeBlockBytes(t));
  if (blocks > std::numeric_limits<uint64_t>::max() / bb) return std::nullopt;
  return static_cast<size_t>(blocks * bb);
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400) == 0);
      u = sign | ((127 - 15 - e) << 23) | ((mant & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7F800000 | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t Fp32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = (x >> 16) & 0x8000;
  const uint32_t absx = x & 0x7FFFFFFF;
  if (absx >= 0x7F800000) return sign | (absx > 0x7F800000 ? 0x7E00 : 0x7C00);
  if (absx >= 0x477FF000) return sign | 0x7C00;  // overflow -> inf
  if (absx < 0x38800000) {                      // subnormal or zero in half
    if (absx < 0x33000000) return sign;
    const uint32_t mant = (absx & 0x7FFFFF) | 0x800000;
    const int shift = 113 - static_cast<int>(absx >> 23) + 13;
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = ((absx >> 13) - (112u << 10));
  const uint32_t rem = absx & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return sign | static_cast<uint16_t>(r);
}

uint16_t Fp32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
      return;
    }
    case DType::kQ8_0: {
      const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t k = 0; k < n / 32; ++k) {
        const float d = Fp16ToFp32(b[k].d);
        for (int j = 0; j < 32; ++j) dst[k * 32 + j] = b[k].qs[j] * d;
      }
      return;
    }
    case DType::kQ4_0: {
      const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t k = 0; k < n / 32; ++k) {
        const float d = Fp16ToFp32(b[k].d);
        for (int j = 0; j < 16; ++j) {
          dst[k * 32 + j] = ((b[k].qs[j] & 0xF) - 8) * d;
          dst[k * 32 + j + 16] = ((b[k].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case DType::kQ4_1: {
      const BlockQ4_1* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t k = 0; k < n / 32; ++k) {
        const float d = Fp16ToFp32(b[k].d);
        const float m = Fp16ToFp32(b[k].m);
        for (int j = 0; j < 16; ++j) {
          dst[k * 32 + j] = (b[k].qs[j] & 0xF) * d + m;
          dst[k * 32 + j + 16] = (b[k].qs[j] >> 4) * d + m;
        }
      }
      return;
    }
  }
}

}  // namespace loom
