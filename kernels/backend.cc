#include "kernels/backend.h"

#include <cmath>

namespace loom::kernels {

// Matches ggml-cpu's x86 quantize_row_q8_1 (what llama.cpp runs on these machines):
// d = amax / 127, q = round-half-to-even(x * (127 / amax)), and the stored d and
// s = d * sum(q) are rounded to FP16 (block_q8_1 holds them as halves). Optimised backends
// reproduce this bit for bit.
void QuantizeRowQ8(const float* x, int k, BlockQ8Act* out) {
  for (int b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float a = std::fabs(xb[j]);
      if (a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(xb[j] * id));
      out[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = Fp16ToFp32(Fp32ToFp16(d));
    out[b].s = Fp16ToFp32(Fp32ToFp16(d * static_cast<float>(sum)));
  }
}

}  // namespace loom::kernels
