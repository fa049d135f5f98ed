// The Loom quantized checkpoint ("loom-atom", version 1): a directory holding
// `loom_quant.json` and `model.safetensors`. It is an OVERLAY on a base model: embeddings,
// norms, the output head, the config and the tokenizer come from the base model file
// (recorded by path, sha256 and size); the checkpoint holds only the seven projections of
// every layer, quantized per kernels/quant/atom_format.h, and the channel permutations.
//
// loom_quant.json:
//   {"format": "loom-atom", "version": 1, "architecture": "llama",
//    "scheme": "w4a4"|"w4a8"|"w8a8", "group_size": 128, "weight_bits": 4|8,
//    "activation_bits": 4|8,
//    "outliers": {"attn_norm": 64, "attn_out": 64, "ffn_norm": 64, "silu_mul": 128},
//    "gptq": bool, "clip_search": {"enabled": bool, "min_ratio": 0.5, "steps": 20},
//    "gptq_options": {"damp": 0.01, "act_order": bool, "static_groups": bool,
//                     "hessian_scale_search": bool},          (optional; these defaults)
//    "w4_full_range": bool,  (optional, false: 4-bit codes in [-7, 7]; true: [-8, 7])
//    "outlier_selection": "energy"|"owq",  (optional, "energy")
//    "refit_scales": bool,  (optional, false)
//    "base_model": {"path": str, "sha256": hex, "bytes": int},
//    "calibration": {"text": path, "sha256": hex, "sequences": 32, "seq_len": 512,
//                    "source": str,
//                    "texts": [{"path", "sha256", "weight", "sequences"}, ...]},  (optional:
//                    only when several texts were mixed; text/sha256 then list them all)
//    "n_layers": 30,
//    "rotation": {"kind": "randomized_hadamard", "seed": int, "online_attn_out": bool,
//                 "online_silu_mul": bool, "residual_outliers": int, "attn_out_outliers":
//                 int, "silu_mul_outliers": int (the three optional, 0),
//                 "fingerprint": 16 hex}}   (version 2 only)
//
// Version 2 = a ROTATED checkpoint (QuaRot, models/rotation/model_rotation.h): the weights
// hold the rotation and folded norm scales, and the model must run them with the rotation
// the "rotation" object names (readers of version 1 refuse these). The rotation's channel
// orders are the checkpoint's own permutations (attn_norm's for the residual, attn_out's
// and silu_mul's per layer: model_rotation.h) and its outlier counts the INT8 channels';
// the reader rebuilds the rotation from them and refuses a fingerprint that differs from
// the recorded one. With online_silu_mul, ffn_gate/ffn_up rows are in the base order (the
// exception below does not apply) and down's input is reordered by silu_mul.perm first,
// then rotated.
//
// model.safetensors, for layer i, projection p (QuantProjectionName) reading activation a:
//   blk.i.p.qweight          U8 [rows, spec.weight_row_bytes()]  (w_bits 4: header packing)
//                            I8 [rows, spec.k_normal_padded()]   (w_bits 8)
//   blk.i.p.scales           F32 [rows, spec.n_groups()]
//   blk.i.p.qweight_outlier  I8 [rows, n_outliers(a)]   } both absent when
//   blk.i.p.outlier_scales   F32 [rows]                 } n_outliers(a) == 0
//   blk.i.a.perm             I32 [k(a)] for a in attn_norm (q/k/v input order), attn_out (o),
//                            ffn_norm (gate/up), silu_mul (down's input order).
// Permuted channel j of activation a is original channel perm[j]; outliers are the last
// n_outliers(a). Columns of every weight are stored in its input's permuted order. Rows are
// in the base model's order (q/k rows keep the base file's rope layout), EXCEPT ffn_gate and
// ffn_up: their stored row j is original row silu_mul.perm[j], so silu(gate)*up comes out
// already in down's input order.
#ifndef LOOM_MODELS_QUANT_QUANTIZED_CHECKPOINT_H_
#define LOOM_MODELS_QUANT_QUANTIZED_CHECKPOINT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/atom_format.h"
#include "kernels/quant/weight_packing.h"
#include "models/model_config.h"
#include "models/quant/quant_names.h"
#include "models/rotation/model_rotation.h"
#include "nlohmann/json.hpp"

namespace loom {
class SafetensorsFile;
}

namespace loom::quant {

inline constexpr char kQuantJsonName[] = "loom_quant.json";
inline constexpr char kQuantTensorsName[] = "model.safetensors";
inline constexpr char kQuantFormat[] = "loom-atom";
inline constexpr int kQuantFormatVersion = 1;
inline constexpr int kQuantFormatVersionRotated = 2;

// Outlier channels per activation, indexed by QuantActivation.
using OutlierCounts = std::array<int, kNumQuantActivations>;

struct ClipSearchMeta {
  bool enabled = true;
  double min_ratio = 0.5;  // grid: absmax * c, c from 1.0 down to min_ratio
  int steps = 20;          // grid points, both ends included
};

// How GPTQ ran (provenance only: the tensors read the same either way). Absent from
// checkpoints written before these options existed; the defaults are what they used.
struct GptqMeta {
  double damp = 0.01;
  bool act_order = false;
  bool static_groups = false;
  bool hessian_scale_search = false;
};

struct BaseModelRef {
  std::string path;
  std::string sha256;  // lowercase hex
  int64_t bytes = 0;   // file size (a directory: the sum over its files)
};

// One of several calibration texts mixed by weight.
struct CalibrationText {
  std::string path;
  std::string sha256;
  double weight = 1;
  int sequences = 0;  // drawn from this text
};

struct CalibrationRef {
  std::string text;    // path of the calibration text (several: joined by ",")
  std::string sha256;  // of the text file (several: their sha256s joined by ",")
  int sequences = 0;
  int seq_len = 0;
  std::string source;  // provenance and licence of the text
  std::vector<CalibrationText> texts;  // when several were mixed (else empty)
};

// The rotation folded into a version-2 checkpoint.
struct RotationMeta {
  RotationSpec spec;
  std::string fingerprint;  // ModelRotation::Fingerprint() when it was written
};
inline constexpr char kRotationKind[] = "randomized_hadamard";

struct QuantizedCheckpointMeta {
  std::string architecture = "llama";
  kernels::quant::QuantScheme scheme = kernels::quant::QuantScheme::kW4A4;
  int group_size = 128;
  int weight_bits = 4;
  int activation_bits = 4;
  OutlierCounts outliers = {0, 0, 0, 0};
  bool gptq = false;
  ClipSearchMeta clip_search;
  GptqMeta gptq_options;
  bool w4_full_range = false;  // 4-bit codes use [-8, 7] (the format always allows it)
  std::string outlier_selection = "energy";  // "energy" or "owq" (provenance)
  bool refit_scales = false;  // least-squares scale refit (scale_refit.h; provenance)
  BaseModelRef base_model;
  CalibrationRef calibration;
  int n_layers = 0;
  std::optional<RotationMeta> rotation;  // set: a rotated (version 2) checkpoint

  nlohmann::json ToJson() const;
  // InvalidArgument naming the key for a missing key, a wrong type or a value out of
  // range (unknown format/version/architecture/scheme, bits not matching the scheme,
  // group not positive and even, negative outliers or layers).
  static absl::StatusOr<QuantizedCheckpointMeta> FromJson(const nlohmann::json& j);

  // The QuantSpec of a projection's weight with `k` input channels.
  kernels::quant::QuantSpec Spec(QuantProjection p, int k) const;
};

// One layer's weights, ready for the Atom kernels. Pointers into the checkpoint's memory.
struct QuantizedLayerView {
  std::array<kernels::quant::AtomWeightView, kNumQuantProjections> proj;  // by QuantProjection
  std::array<const int32_t*, kNumQuantActivations> perm{};  // by QuantActivation; [k(a)]
  std::array<int, kNumQuantActivations> k{};                // channels of each activation
};

// A checkpoint opened for reading. Owns the mapping of model.safetensors (and copies of
// any tensor that is not 4-byte aligned in the file); views stay valid while it lives
// (moving it keeps them valid).
class QuantizedCheckpoint {
 public:
  // Reads and validates dir/loom_quant.json and dir/model.safetensors: every tensor the
  // metadata implies is present with its exact dtype and shape (rows consistent across
  // the projections reading one activation, k(a) the same in every layer), every perm is
  // a permutation, every scale finite and >= 0, no unexpected tensor. NotFound for a
  // missing file; InvalidArgument naming the file and the tensor or key otherwise.
  static absl::StatusOr<QuantizedCheckpoint> Open(const std::string& dir);

  QuantizedCheckpoint(QuantizedCheckpoint&&) noexcept;
  QuantizedCheckpoint& operator=(QuantizedCheckpoint&&) noexcept;
  ~QuantizedCheckpoint();

  const std::string& dir() const { return dir_; }
  const QuantizedCheckpointMeta& meta() const { return meta_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  const QuantizedLayerView& layer(int i) const { return layers_[i]; }

  // FailedPrecondition unless the shapes match `config` (layers, hidden, q/kv widths,
  // intermediate) and the architecture is llama; for a rotated checkpoint also unless the
  // rotation rebuilt for `config` (Rotation) has the recorded fingerprint.
  absl::Status CheckConfig(const LlamaConfig& config) const;

  // A rotated checkpoint's rotation rebuilt for `config` (without folded norms: the
  // caller adds the base model's, ModelRotation::SetFoldedNorms). FailedPrecondition when
  // it cannot be built or its fingerprint differs from the recorded one; NotFound for an
  // unrotated checkpoint.
  absl::StatusOr<ModelRotation> Rotation(const LlamaConfig& config) const;

  // FailedPrecondition unless the file at `path` has the recorded size and, when
  // `verify_sha256`, the recorded sha256 (reads the whole file: ~0.3 s per 100 MB).
  absl::Status CheckBaseModelFile(const std::string& path, bool verify_sha256) const;

 private:
  QuantizedCheckpoint() = default;
  absl::Status Load();

  std::string dir_;
  QuantizedCheckpointMeta meta_;
  std::unique_ptr<SafetensorsFile> file_;
  std::vector<std::vector<uint32_t>> owned_;  // realigned copies of 4-byte tensors
  std::vector<QuantizedLayerView> layers_;
};

// One layer as the writer takes it: owned weights (kernels/quant/weight_packing.h).
struct QuantizedLayer {
  std::array<kernels::quant::AtomWeight, kNumQuantProjections> proj;  // by QuantProjection
  std::array<std::vector<int32_t>, kNumQuantActivations> perm;  // by QuantActivation
};

// Writes dir/model.safetensors then dir/loom_quant.json (creating dir). InvalidArgument
// if a layer's sizes disagree with its spec or meta.n_layers != layers.size().
absl::Status WriteQuantizedCheckpoint(const std::string& dir, const QuantizedCheckpointMeta& meta,
                                      const std::vector<QuantizedLayer>& layers);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_QUANTIZED_CHECKPOINT_H_
