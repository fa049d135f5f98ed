// A calibration set mixed from several texts by weight (e.g. fiction, a manual and source
// code from different Debian packages, scripts/fetch_domain_texts.sh): each text gives a
// share of the calibration sequences proportional to its weight.
#ifndef LOOM_MODELS_QUANT_CALIBRATION_MIX_H_
#define LOOM_MODELS_QUANT_CALIBRATION_MIX_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::quant {

struct WeightedText {
  std::string path;
  double weight = 1;
};

// "a.txt:2,b.txt,c.txt:0.5" -> {a.txt 2}, {b.txt 1}, {c.txt 0.5}. InvalidArgument for an
// empty list or path, or a weight that is not a finite number > 0.
absl::StatusOr<std::vector<WeightedText>> ParseWeightedTexts(const std::string& spec);

// Splits `total` sequences over the weights by largest remainder (ties to the earlier
// text), every text at least one. InvalidArgument when total < weights.size() or a
// weight is not > 0.
absl::StatusOr<std::vector<int>> SplitSequences(int total, const std::vector<double>& weights);

// True for a file name that marks an evaluation text ("heldout*"): never calibrate on it.
bool IsHeldOutName(const std::string& path);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_CALIBRATION_MIX_H_
