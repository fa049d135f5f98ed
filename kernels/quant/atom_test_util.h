// Random inputs and an independent quantizer for the Atom kernel tests.
#ifndef LOOM_KERNELS_QUANT_ATOM_TEST_UTIL_H_
#define LOOM_KERNELS_QUANT_ATOM_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/quant/atom_format.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::quant::testing {

// Uniform [-scale, scale) values; every `outlier_every`-th channel (if > 0) is 30x larger,
// like the activation outliers Atom moves to the end.
inline std::vector<float> RandomValues(size_t n, uint32_t seed, float scale = 1.0f,
                                       int k = 0, int outlier_every = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = u(rng);
    if (outlier_every > 0 && k > 0 && (i % k) % outlier_every == 0) v[i] *= 30.0f;
  }
  return v;
}

// A random permutation of 0..k-1.
inline std::vector<int32_t> RandomPerm(int k, uint32_t seed) {
  std::vector<int32_t> p(k);
  std::iota(p.begin(), p.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

// Nearest integer, ties to even, written independently of nearbyint.
inline int RoundHalfEven(float p) {
  const float fl = std::floor(p);
  const float diff = p - fl;
  int q = static_cast<int>(fl);
  if (diff > 0.5f || (diff == 0.5f && (q % 2 != 0))) ++q;
  return q;
}

// The header's rule for one permuted row xp [spec.k], straightforwardly.
struct ExpectedRow {
  std::vector<int8_t> q;        // [k_normal_padded]
  std::vector<float> scales;    // [n_groups]
  std::vector<int8_t> q_outlier;
  float outlier_scale = 0.0f;
};
inline void QuantizeSpan(const float* x, int cnt, int qmax, int8_t* q, float* scale) {
  float amax = 0.0f;
  for (int i = 0; i < cnt; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float inv = amax > 0.0f ? static_cast<float>(qmax) / amax : 0.0f;
  for (int i = 0; i < cnt; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(RoundHalfEven(x[i] * inv), -qmax, qmax));
  }
  *scale = amax / static_cast<float>(qmax);
}
inline ExpectedRow ExpectedQuantization(const float* xp, const QuantSpec& s) {
  ExpectedRow e;
  e.q.assign(s.k_normal_padded(), 0);
  e.scales.assign(s.n_groups(), 0.0f);
  e.q_outlier.assign(s.n_outliers, 0);
  const int qmax = s.a_bits == 4 ? 7 : 127;
  for (int g = 0; g < s.n_groups(); ++g) {
    const int j0 = g * s.group;
    QuantizeSpan(xp + j0, std::min(s.group, s.k_normal() - j0), qmax, e.q.data() + j0,
                 &e.scales[g]);
  }
  if (s.n_outliers > 0) {
    QuantizeSpan(xp + s.k_normal(), s.n_outliers, 127, e.q_outlier.data(), &e.outlier_scale);
  }
  return e;
}

}  // namespace loom::kernels::quant::testing

#endif  // LOOM_KERNELS_QUANT_ATOM_TEST_UTIL_H_
