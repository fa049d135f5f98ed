// loom_quantize's whole job as a library call: open the base model, refuse what cannot be
// quantized, calibrate (or reuse cached statistics), quantize and write the checkpoint.
#ifndef LOOM_MODELS_QUANT_QUANTIZE_PIPELINE_H_
#define LOOM_MODELS_QUANT_QUANTIZE_PIPELINE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "models/quant/calibration_mix.h"
#include "models/quant/model_quantizer.h"
#include "models/quant/quant_options.h"
#include "models/quant/quantized_checkpoint.h"

namespace loom::quant {

inline constexpr char kJaneAustenSource[] =
    "Jane Austen novels via Debian r-cran-janeaustenr (MIT; texts public domain)";

struct QuantizeRequest {
  std::string model_path;        // GGUF file or HF directory
  std::string calibration_text;  // UTF-8 text file (never the held-out evaluation text)
  // Several texts mixed by weight (calibration_mix.h); when set, calibration_text is
  // ignored. One text of weight 1 is the same as calibration_text.
  std::vector<WeightedText> calibration_texts;
  std::string calibration_source = kJaneAustenSource;
  std::string out_dir;
  int sequences = 32;
  int seq_len = 512;
  std::string cache_dir;  // calibration statistics cache; "" = none
  QuantOptions options;
};

struct QuantizeReport {
  QuantizedCheckpointMeta meta;
  int64_t calibration_tokens = 0;
  bool calibration_cached = false;
  double calibration_seconds = 0;  // forward passes (0 when cached)
  double quantize_seconds = 0;
  int64_t safetensors_bytes = 0;
  OutputErrorStats output_error;  // filled when the statistics hold Hessians
  bool has_output_error = false;
};

// Refusals (InvalidArgument unless noted, each naming the cause): a model that is not a
// Llama (the reader's message and code: Unimplemented), a scheme of 'none', a group size that is odd, not
// positive or wider than an activation, outlier counts whose remainder is not a multiple
// of the group, an empty calibration text or one named heldout* (an evaluation text), too
// few tokens for a text's share of sequences x seq_len; NotFound for a missing model or
// text file; Unimplemented for a rotation the model's widths do not allow.
//
// With options.rotation, the model (dequantized to F32) gets the rotation folded in
// (models/rotation/rotate_weights.h) before calibration: the statistics are those of the
// rotated activations the quantized model will see, and the checkpoint is version 2.
absl::StatusOr<QuantizeReport> QuantizeToCheckpoint(const QuantizeRequest& r,
                                                    const std::function<void(const std::string&)>& log);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_QUANTIZE_PIPELINE_H_
