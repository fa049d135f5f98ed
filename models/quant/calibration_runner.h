// Calibration: cuts real text into token sequences and runs the (F32) model over them with
// a CalibrationTap attached. The held-out evaluation text must never be passed here.
#ifndef LOOM_MODELS_QUANT_CALIBRATION_RUNNER_H_
#define LOOM_MODELS_QUANT_CALIBRATION_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "models/llama/llama_model.h"
#include "models/quant/calibration_stats.h"
#include "models/tokenizer/tokenizer.h"

namespace loom::quant {

// `sequences` windows of `seq_len` tokens, evenly spaced over the tokenized text (no BOS):
// window i starts at i * (N / sequences), so they never overlap and cover the whole text.
// InvalidArgument for an empty (or whitespace-only) text, sequences or seq_len < 1, or a
// text of fewer than sequences * seq_len tokens (the message gives both numbers).
absl::StatusOr<std::vector<std::vector<int32_t>>> CalibrationSequences(const Tokenizer& tokenizer,
                                                                       std::string_view text,
                                                                       int sequences, int seq_len);

// Runs each sequence as one prefill (fresh KV cache, no logits) and returns the statistics.
// hessian_backend (nullable) computes X^T X when `hessian`. progress (nullable) is called
// after each sequence with (done, total).
absl::StatusOr<CalibrationStats> RunCalibration(const LlamaModel& model,
                                                const std::vector<std::vector<int32_t>>& seqs,
                                                bool hessian, kernels::Backend* hessian_backend,
                                                const std::function<void(int, int)>& progress);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_CALIBRATION_RUNNER_H_
