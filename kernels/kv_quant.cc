#include "kernels/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/dtype.h"

namespace loom::kernels {
namespace {

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

void QuantizeInt8(const float* x, int d, uint8_t* row) {
  float amax = 0.0f;
  for (int i = 0; i < d; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t scale16 = Fp32ToFp16(amax / 127.0f);
  const float scale = Fp16ToFp32(scale16);
  StoreU16(row, scale16);
  int8_t* q = reinterpret_cast<int8_t*>(row + 2);
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < d; ++i) {
    const float r = std::nearbyint(x[i] * inv);
    q[i] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
}

void QuantizeInt4(const float* x, int d, uint8_t* row) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < d; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  const uint16_t min16 = Fp32ToFp16(mn);
  const uint16_t scale16 = Fp32ToFp16((mx - mn) / 15.0f);
  const float m = Fp16ToFp32(min16), scale = Fp16ToFp32(scale16);
  StoreU16(row, scale16);
  StoreU16(row + 2, min16);
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  const int half = d / 2;
  uint8_t* q = row + 4;
  for (int i = 0; i < half; ++i) {
    const float lo = std::clamp(std::nearbyint((x[i] - m) * inv), 0.0f, 15.0f);
    const float hi = std::clamp(std::nearbyint((x[i + half] - m) * inv), 0.0f, 15.0f);
    q[i] = static_cast<uint8_t>(static_cast<int>(lo) | (static_cast<int>(hi) << 4));
  }
}

}  // namespace

bool KvRowIsRotated(KvDtype dtype, int head_dim) {
  return dtype != KvDtype::kF16 && head_dim >= 2 && (head_dim & (head_dim - 1)) == 0;
}

void HadamardRotate(float* x, int head_dim) {
  for (int len = 1; len < head_dim; len <<= 1) {
    for (int i = 0; i < head_dim; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int i = 0; i < head_dim; ++i) x[i] *= scale;
}

void QuantizeKvRow(KvDtype dtype, const float* x, int head_dim, uint8_t* row) {
  float rotated[4096];
  if (KvRowIsRotated(dtype, head_dim)) {
    std::memcpy(rotated, x, sizeof(float) * head_dim);
    HadamardRotate(rotated, head_dim);
    x = rotated;
  }
  switch (dtype) {
    case KvDtype::kInt8: QuantizeInt8(x, head_dim, row); return;
    case KvDtype::kInt4: QuantizeInt4(x, head_dim, row); return;
    case KvDtype::kF16: break;
  }
  for (int i = 0; i < head_dim; ++i) StoreU16(row + 2 * i, Fp32ToFp16(x[i]));
}

void DequantizeKvRow(KvDtype dtype, const uint8_t* row, int head_dim, float* out) {
  DecodeKvRowStored(dtype, row, head_dim, out);
  if (KvRowIsRotated(dtype, head_dim)) HadamardRotate(out, head_dim);
}

void DecodeKvRowStored(KvDtype dtype, const uint8_t* row, int head_dim, float* out) {
  switch (dtype) {
    case KvDtype::kInt8: {
      const float scale = Fp16ToFp32(LoadU16(row));
      const int8_t* q = reinterpret_cast<const int8_t*>(row + 2);
      for (int i = 0; i < head_dim; ++i) out[i] = scale * static_cast<float>(q[i]);
      return;
    }
    case KvDtype::kInt4: {
      const float scale = Fp16ToFp32(LoadU16(row)), m = Fp16ToFp32(LoadU16(row + 2));
      const int half = head_dim / 2;
      const uint8_t* q = row + 4;
      for (int i = 0; i < half; ++i) {
        out[i] = scale * static_cast<float>(q[i] & 15) + m;
        out[i + half] = scale * static_cast<float>(q[i] >> 4) + m;
      }
      return;
    }
    case KvDtype::kF16: break;
  }
  for (int i = 0; i < head_dim; ++i) out[i] = Fp16ToFp32(LoadU16(row + 2 * i));
}

absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "f16" || name == "fp16") return KvDtype::kF16;
  if (name == "int8") return KvDtype::kInt8;
  if (name == "int4") return KvDtype::kInt4;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV cache dtype '", std::string(name), "' (expected f16, int8 or int4)"));
}

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kInt8: return "int8";
    case KvDtype::kInt4: return "int4";
    case KvDtype::kF16: break;
  }
  return "f16";
}

}  // namespace loom::kernels
