#include "models/quant/calibration_mix.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace loom::quant {

absl::StatusOr<std::vector<WeightedText>> ParseWeightedTexts(const std::string& spec) {
  std::vector<WeightedText> out;
  for (absl::string_view piece : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::string item(absl::StripAsciiWhitespace(piece));
    WeightedText t;
    const size_t colon = item.rfind(':');
    t.path = colon == std::string::npos ? item : item.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string w = item.substr(colon + 1);
      if (!absl::SimpleAtod(w, &t.weight) || !std::isfinite(t.weight) || t.weight <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("calibration text '", item, "': weight '", w, "' is not a number > 0"));
      }
    }
    if (t.path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("calibration text '", item, "' has no path"));
    }
    out.push_back(std::move(t));
  }
  if (out.empty()) return absl::InvalidArgumentError("no calibration text given");
  return out;
}

absl::StatusOr<std::vector<int>> SplitSequences(int total, const std::vector<double>& weights) {
  const int n = static_cast<int>(weights.size());
  if (n == 0 || total < n) {
    return absl::InvalidArgumentError(absl::StrCat(
        total, " calibration sequences cannot cover ", n, " texts (at least one each)"));
  }
  double sum = 0;
  for (double w : weights) {
    if (!(w > 0) || !std::isfinite(w)) return absl::InvalidArgumentError("weights must be > 0");
    sum += w;
  }
  // One each first, then the rest by largest remainder.
  const int rest = total - n;
  std::vector<int> out(n, 1);
  std::vector<double> frac(n);
  int given = 0;
  for (int i = 0; i < n; ++i) {
    const double exact = rest * weights[i] / sum;
    const int whole = static_cast<int>(std::floor(exact));
    out[i] += whole;
    given += whole;
    frac[i] = exact - whole;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return frac[a] > frac[b]; });
  for (int i = 0; given < rest; ++i, ++given) ++out[order[i % n]];
  return out;
}

bool IsHeldOutName(const std::string& path) {
  return std::filesystem::path(path).filename().string().rfind("heldout", 0) == 0;
}

}  // namespace loom::quant
