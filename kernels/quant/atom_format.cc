#include "kernels/quant/atom_format.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace loom::kernels::quant {

std::string_view QuantSchemeName(QuantScheme s) {
  switch (s) {
    case QuantScheme::kNone: return "none";
    case QuantScheme::kW8A8: return "w8a8";
    case QuantScheme::kW4A8: return "w4a8";
    case QuantScheme::kW4A4: return "w4a4";
  }
  return "?";
}

absl::StatusOr<QuantScheme> ParseQuantScheme(std::string_view name) {
  for (QuantScheme s :
       {QuantScheme::kNone, QuantScheme::kW8A8, QuantScheme::kW4A8, QuantScheme::kW4A4}) {
    if (name == QuantSchemeName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown quantization scheme '", std::string(name), "' (none, w8a8, w4a8, w4a4)"));
}

int SchemeWeightBits(QuantScheme s) {
  switch (s) {
    case QuantScheme::kNone: return 0;
    case QuantScheme::kW8A8: return 8;
    case QuantScheme::kW4A8:
    case QuantScheme::kW4A4: return 4;
  }
  return 0;
}

int SchemeActivationBits(QuantScheme s) {
  switch (s) {
    case QuantScheme::kNone: return 0;
    case QuantScheme::kW8A8:
    case QuantScheme::kW4A8: return 8;
    case QuantScheme::kW4A4: return 4;
  }
  return 0;
}

absl::Status QuantSpec::Validate() const {
  if (k <= 0) return absl::InvalidArgumentError(absl::StrCat("QuantSpec: k = ", k, " <= 0"));
  if (n_outliers < 0 || n_outliers > k) {
    return absl::InvalidArgumentError(
        absl::StrCat("QuantSpec: n_outliers = ", n_outliers, " not in [0, k = ", k, "]"));
  }
  if (group <= 0 || group % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("QuantSpec: group = ", group, " must be positive and even"));
  }
  if (w_bits != 4 && w_bits != 8) {
    return absl::InvalidArgumentError(absl::StrCat("QuantSpec: w_bits = ", w_bits, " (4 or 8)"));
  }
  if (a_bits != 4 && a_bits != 8) {
    return absl::InvalidArgumentError(absl::StrCat("QuantSpec: a_bits = ", a_bits, " (4 or 8)"));
  }
  return absl::OkStatus();
}

bool operator==(const QuantSpec& a, const QuantSpec& b) {
  return a.k == b.k && a.n_outliers == b.n_outliers && a.group == b.group &&
         a.w_bits == b.w_bits && a.a_bits == b.a_bits;
}

void AtomActivations::Resize(const QuantSpec& s, int rows) {
  spec = s;
  n = rows;
  const size_t r = static_cast<size_t>(std::max(rows, 0));
  auto grow = [](auto& v, size_t need) {
    if (v.size() < need) v.resize(need);
  };
  grow(q, r * s.k_normal_padded());
  grow(scales, r * s.n_groups());
  grow(q_outlier, r * s.n_outliers);
  grow(outlier_scales, r);
}

}  // namespace loom::kernels::quant
