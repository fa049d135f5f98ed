// On-disk cache of CalibrationStats, so a rerun of the quantizer (another scheme, GPTQ on
// or off) skips the forward passes. One file per key; the key names everything the
// statistics depend on (model sha256, calibration-text sha256, sequences, seq_len,
// whether Hessians were collected).
//
// File: "LOOMCAL1", u32 key length, key bytes, i64 tokens, u8 has_hessian, i32 n_layers,
// then per layer and activation: i32 k, f64 energy [k], (has_hessian) f32 hessian [k, k].
// Little-endian host layout.
#ifndef LOOM_MODELS_QUANT_CALIBRATION_CACHE_H_
#define LOOM_MODELS_QUANT_CALIBRATION_CACHE_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/quant/calibration_stats.h"

namespace loom::quant {

// The cache key: a canonical one-line description of what the statistics depend on.
std::string CalibrationCacheKey(const std::string& model_sha256, const std::string& text_sha256,
                                int sequences, int seq_len, bool hessian);

// Writes to path + ".tmp" then renames (a crash leaves no half file under `path`).
absl::Status SaveCalibrationStats(const std::string& path, const std::string& key,
                                  const CalibrationStats& stats);

// NotFound without a file; FailedPrecondition when its key differs; DataLoss when it is
// truncated or malformed.
absl::StatusOr<CalibrationStats> LoadCalibrationStats(const std::string& path,
                                                      const std::string& key);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_CALIBRATION_CACHE_H_
