// The output head of a quantized model as an Atom W8A8 linear (the optional INT8 head):
// the model's output matrix [vocab, hidden] (as stored, e.g. the GGUF's Q8_0 tied
// embedding) is requantized once at load to INT8 weights with Atom's layout: the
// HeadOutliers(hidden) input channels of highest weight energy (sum over rows of w^2)
// go last as an INT8 outlier block with one scale per row; the rest is INT8 in groups of
// kHeadGroup with one scale per (row, group). At run time the final-norm output is
// reordered and quantized per token (INT8, same groups + outlier block) and multiplied by
// the integer kernels (kernels/quant/atom_format.h).
//
// Why: at batch 32 the GGUF's Q8_0 head (one FP16 scale per 32 values on both sides)
// spends a float conversion and an FMA per 32 products; one scale per 256 does not.
// Cost: SmolLM2-135M W8A8 perplexity 40.111 -> 40.235 (+0.31%) on the held-out text.
// The choice is data-free (no calibration statistics of the final norm's output exist).
#ifndef LOOM_MODELS_LLAMA_QUANTIZED_HEAD_H_
#define LOOM_MODELS_LLAMA_QUANTIZED_HEAD_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/quant/weight_packing.h"

namespace loom {

inline constexpr int kHeadGroup = 256;

// INT8 outlier channels of the head for a hidden size: hidden / 8 rounded down to a
// multiple of 32, at most 128 (SmolLM2: 576 -> 64; Llama-7B: 4096 -> 128).
int HeadOutliers(int hidden);

struct QuantizedHead {
  kernels::quant::AtomWeight weight;  // [vocab, hidden] in `perm` column order, w8a8
  std::vector<int32_t> perm;          // [hidden]: column j reads source channel perm[j]
};

// Requantizes `output` (a dtype DequantizeRow reads). InvalidArgument for an empty matrix
// or a hidden size below 64.
absl::StatusOr<QuantizedHead> QuantizeOutputHead(const kernels::WeightMatrix& output);

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_QUANTIZED_HEAD_H_
