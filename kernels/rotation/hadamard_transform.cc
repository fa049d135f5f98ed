#include "kernels/rotation/hadamard_transform.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/rotation/hadamard_matrix.h"

namespace loom::kernels {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void Fnv(uint64_t* h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    *h ^= p[i];
    *h *= 0x100000001B3ull;
  }
}

}  // namespace

absl::StatusOr<HadamardTransform> HadamardTransform::Create(int n, std::vector<float> signs,
                                                            int block) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("Hadamard transform of length ", n));
  if (block < 0 || (block > 0 && n % block != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hadamard transform of length ", n, " in blocks of ", block));
  }
  const int bn = block > 0 ? block : n;
  absl::StatusOr<int> k = HadamardBaseOrder(bn);
  if (!k.ok()) return k.status();
  absl::StatusOr<std::vector<int8_t>> hk = HadamardMatrix(*k);
  if (!hk.ok()) return hk.status();
  if (!signs.empty()) {
    if (static_cast<int>(signs.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("Hadamard transform of length ", n, " given ", signs.size(), " signs"));
    }
    for (size_t i = 0; i < signs.size(); ++i) {
      if (signs[i] != 1.0f && signs[i] != -1.0f) {
        return absl::InvalidArgumentError(
            absl::StrCat("Hadamard sign ", i, " is ", signs[i], ", not +1 or -1"));
      }
    }
  }
  HadamardTransform t;
  t.n_ = n;
  t.k_ = *k;
  t.p_ = bn / *k;
  t.b_ = n / bn;
  t.scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(bn)));
  t.hk_ = *std::move(hk);
  t.signs_ = std::move(signs);
  return t;
}

absl::StatusOr<HadamardTransform> HadamardTransform::CreateFullOrBlocked(int n,
                                                                         std::vector<float> signs) {
  if (n >= 1 && HadamardBaseOrder(n).ok()) return Create(n, std::move(signs));
  for (int block = 1 << 14; block >= 16; block >>= 1) {
    if (block < n && n % block == 0) return Create(n, std::move(signs), block);
  }
  return absl::UnimplementedError(absl::StrCat(
      "no Hadamard transform of width ", n, ": neither a Hadamard matrix of that order nor "
      "a power-of-two block >= 16 dividing it"));
}

std::vector<float> HadamardTransform::RandomSigns(int n, uint64_t seed) {
  std::vector<float> s(n > 0 ? n : 0);
  uint64_t state = seed;
  for (int i = 0; i < n; i += 64) {
    const uint64_t bits = SplitMix64(&state);
    for (int j = 0; j < 64 && i + j < n; ++j) s[i + j] = (bits >> j) & 1 ? -1.0f : 1.0f;
  }
  return s;
}

void HadamardTransform::ApplyBlock(float* v, bool transpose, float* z) const {
  const int k = k_, p = p_, kp = k_ * p_;
  for (int a = 0; a < k; ++a) {
    float* run = v + a * p;
    for (int h = 1; h < p; h <<= 1) {
      for (int j = 0; j < p; ++j) {
        if (j & h) continue;
        const float u = run[j], w = run[j + h];
        run[j] = u + w;
        run[j + h] = u - w;
      }
    }
  }
  if (k > 1) {
    for (int a = 0; a < k; ++a) {
      for (int b = 0; b < p; ++b) {
        auto coef = [&](int a2) {
          return transpose ? hk_[static_cast<size_t>(a2) * k + a] : hk_[static_cast<size_t>(a) * k + a2];
        };
        float acc = coef(0) > 0 ? v[b] : -v[b];
        for (int a2 = 1; a2 < k; ++a2) {
          acc = coef(a2) > 0 ? acc + v[a2 * p + b] : acc - v[a2 * p + b];
        }
        z[a * p + b] = acc;
      }
    }
    std::memcpy(v, z, sizeof(float) * kp);
  }
  for (int i = 0; i < kp; ++i) v[i] *= scale_;
}

void HadamardTransform::Apply(float* x, int64_t rows, bool transpose) const {
  const int n = n_, kp = k_ * p_;
  std::vector<float> z(k_ > 1 ? kp : 0);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * n;
    if (!transpose && !signs_.empty()) {
      for (int i = 0; i < n; ++i) row[i] *= signs_[i];
    }
    for (int c = 0; c < b_; ++c) ApplyBlock(row + c * kp, transpose, z.data());
    if (transpose && !signs_.empty()) {
      for (int i = 0; i < n; ++i) row[i] *= signs_[i];
    }
  }
}

std::vector<double> HadamardTransform::Dense(bool transpose) const {
  const int n = n_, k = k_, p = p_, kp = k_ * p_;
  std::vector<double> t(static_cast<size_t>(n) * n);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kp));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i / kp != j / kp) continue;  // off the diagonal blocks
      const int a = (i % kp) / p, b = i % p, a2 = (j % kp) / p, b2 = j % p;
      const int hp = __builtin_popcount(b & b2) & 1 ? -1 : 1;
      const double m = hk_[static_cast<size_t>(a) * k + a2] * hp * scale;
      // T[i][j] = m · s[j]; Tᵀ[j][i] = the same value.
      const double s = signs_.empty() ? 1.0 : signs_[j];
      if (transpose) {
        t[static_cast<size_t>(j) * n + i] = m * s;
      } else {
        t[static_cast<size_t>(i) * n + j] = m * s;
      }
    }
  }
  return t;
}

uint64_t HadamardTransform::Fingerprint() const {
  uint64_t h = 0xCBF29CE484222325ull;
  const int32_t dims[4] = {n_, k_, p_, b_};
  Fnv(&h, dims, sizeof(dims));
  Fnv(&h, hk_.data(), hk_.size());
  Fnv(&h, signs_.data(), signs_.size() * sizeof(float));
  uint32_t bits;
  std::memcpy(&bits, &scale_, sizeof(bits));
  Fnv(&h, &bits, sizeof(bits));
  return h;
}

}  // namespace loom::kernels
