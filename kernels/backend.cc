#include "kernels/backend.h"

#include <cmath>

namespace loom::kernels {

// Matches ggml's quantize_row_q8_1_ref: d = amax / 127, q = roundf(x * (1 / d)) (round half
// away from zero), s = d * sum(q). Optimised backends reproduce this bit for bit.
void QuantizeRowQ8(const float* x, int k, BlockQ8Act* out) {
  for (int b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float a = std::fabs(xb[j]);
      if (a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::round(xb[j] * id));
      out[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = static_cast<float>(sum) * d;
  }
}

}  // namespace loom::kernels
