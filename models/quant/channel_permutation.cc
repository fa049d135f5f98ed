#include "models/quant/channel_permutation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/quant/weight_packing.h"

namespace loom::quant {

absl::StatusOr<std::vector<int32_t>> OutlierPermutation(const std::vector<double>& energy,
                                                        int n_outliers) {
  const int k = static_cast<int>(energy.size());
  if (k == 0) return absl::InvalidArgumentError("outlier selection: empty energy vector");
  if (n_outliers < 0 || n_outliers > k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "outlier selection: ", n_outliers, " outliers for ", k, " channels"));
  }
  for (int i = 0; i < k; ++i) {
    if (!std::isfinite(energy[i]) || energy[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("outlier selection: channel ", i, " has energy ", energy[i]));
    }
  }
  std::vector<int32_t> by_energy(k);
  for (int i = 0; i < k; ++i) by_energy[i] = i;
  std::stable_sort(by_energy.begin(), by_energy.end(),
                   [&](int32_t a, int32_t b) { return energy[a] > energy[b]; });
  std::vector<bool> outlier(k, false);
  for (int i = 0; i < n_outliers; ++i) outlier[by_energy[i]] = true;
  std::vector<int32_t> perm;
  perm.reserve(k);
  for (int i = 0; i < k; ++i) if (!outlier[i]) perm.push_back(i);
  for (int i = 0; i < k; ++i) if (outlier[i]) perm.push_back(i);
  return perm;
}

absl::StatusOr<std::vector<double>> OwqScores(
    const std::vector<double>& energy, const std::vector<std::pair<const float*, int64_t>>& weights,
    int group, int bits) {
  const int k = static_cast<int>(energy.size());
  if (k == 0) return absl::InvalidArgumentError("OWQ scores: empty energy vector");
  if (group <= 0) return absl::InvalidArgumentError(absl::StrCat("OWQ scores: group ", group));
  if (weights.empty()) return absl::InvalidArgumentError("OWQ scores: no weights");
  for (int i = 0; i < k; ++i) {
    if (!std::isfinite(energy[i]) || energy[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("OWQ scores: channel ", i, " has energy ", energy[i]));
    }
  }
  const float qmax = static_cast<float>(kernels::quant::QMax(bits));
  std::vector<double> err(k, 0.0);
  for (const auto& [w, rows] : weights) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* wr = w + r * k;
      for (int j0 = 0; j0 < k; j0 += group) {
        const int n = std::min(group, k - j0);
        const float absmax = kernels::quant::AbsMax(wr + j0, n);
        const float inv = absmax > 0 ? qmax / absmax : 0.0f, s = absmax / qmax;
        for (int j = j0; j < j0 + n; ++j) {
          const float q = std::clamp(std::nearbyint(wr[j] * inv), -qmax, qmax);
          const double d = static_cast<double>(wr[j]) - static_cast<double>(q) * s;
          err[j] += d * d;
        }
      }
    }
  }
  for (int j = 0; j < k; ++j) err[j] *= energy[j];
  return err;
}

bool IsPermutation(const int32_t* perm, int64_t k) {
  std::vector<bool> seen(k, false);
  for (int64_t j = 0; j < k; ++j) {
    if (perm[j] < 0 || perm[j] >= k || seen[perm[j]]) return false;
    seen[perm[j]] = true;
  }
  return true;
}

std::vector<double> PermuteVector(const std::vector<double>& in, const std::vector<int32_t>& perm) {
  std::vector<double> out(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) out[j] = in[perm[j]];
  return out;
}

std::vector<float> GatherRows(const float* w, int64_t cols, const std::vector<int32_t>& rows) {
  std::vector<float> out(rows.size() * cols);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(out.data() + i * cols, w + rows[i] * cols, cols * sizeof(float));
  }
  return out;
}

std::vector<double> PermuteSymmetric(const std::vector<double>& h, const std::vector<int32_t>& perm) {
  const size_t k = perm.size();
  std::vector<double> out(k * k);
  for (size_t i = 0; i < k; ++i) {
    const double* src = h.data() + static_cast<size_t>(perm[i]) * k;
    double* dst = out.data() + i * k;
    for (size_t j = 0; j < k; ++j) dst[j] = src[perm[j]];
  }
  return out;
}

}  // namespace loom::quant
