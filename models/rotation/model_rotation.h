// QuaRot for a Llama model (Ashkboos et al., "QuaRot: Outlier-Free 4-Bit Inference in
// Rotated LLMs", 2024), composed with Atom's INT8 outlier channels: the orthogonal
// transforms a rotated model uses, and the RMSNorm scales folded into its linears.
// Conventions (column vectors, W [out, in]):
//
//   R   [hidden]        residual rotation. The residual stream of a rotated model is
//                       x_r = R x.
//   M_o [n_heads*hd]    online rotation of o_proj's input, per layer (optional): a_r = M_o a.
//   M_d [intermediate]  online rotation of down_proj's input, per layer (optional).
//
// Each is  P^T · blockdiag(T, I_o) · P : P a channel order (Atom's permutation: the o
// outlier channels last; the identity when o = 0), T a Hadamard transform of the other
// m = width - o channels (kernels/rotation: randomized by the seed's signs for R, full or
// block-diagonal where m has no Hadamard matrix), I_o the outliers left as they are. So
// the outlier channels (chosen on the UNROTATED model: the few that carry most of the
// energy) stay out of the rotation and keep INT8, while the rotation flattens the rest for
// the 4-bit groups; with o = 0 it is plain QuaRot (R = T). In the quantized model's
// permuted input P u the rotated channels come first and the outliers last, so the
// activation's Atom permutation IS P (the residual's for attn_norm and ffn_norm).
//
// Folded offline (models/rotation/rotate_weights.h), g the layer's RMSNorm scale:
//   q, k, v (g = attn_norm), gate, up (g = ffn_norm):  W' = W diag(g) Rᵀ
//   o:    W' = R W M_oᵀ        down:  W' = R W M_dᵀ     (M = I when not online)
// and at run time: the layer norms normalise with unit scale (RMSNorm(R x) = R RMSNorm(x)
// when the scale is 1), embedding rows are rotated as they are looked up (x_r = R e) and
// the rows the head reads are rotated back (x = Rᵀ x_r) before the final norm, so the
// embedding, the final norm and the output head stay as stored. q/k/v/gate/up outputs
// are in the original basis (rope, attention and the KV cache are untouched).
#ifndef LOOM_MODELS_ROTATION_MODEL_ROTATION_H_
#define LOOM_MODELS_ROTATION_MODEL_ROTATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/rotation/hadamard_transform.h"
#include "models/model_config.h"
#include "models/weights/model_source.h"

namespace loom {

// What a rotation is made of; recorded in a rotated checkpoint.
struct RotationSpec {
  uint64_t seed = 0;             // the residual rotation's random signs
  bool online_attn_out = true;   // M_o on o_proj's input
  bool online_silu_mul = true;   // M_d on down_proj's input
  // Channels kept out of each rotation (and in INT8): 0 = rotate every channel.
  int residual_outliers = 0;     // of the residual stream, one set for all layers
  int attn_out_outliers = 0;     // of o_proj's input, per layer (with online_attn_out)
  int silu_mul_outliers = 0;     // of down_proj's input, per layer (with online_silu_mul)
};

// The orders P of the partial rotations (permuted channel j = original channel P[j],
// outliers last), from the unrotated model's calibration. Empty where the spec's outlier
// count is 0 (P = identity).
struct RotationOrders {
  std::vector<int32_t> residual;               // [hidden]
  std::vector<std::vector<int32_t>> attn_out;  // [n_layers][n_heads * head_dim]
  std::vector<std::vector<int32_t>> silu_mul;  // [n_layers][intermediate]
};

class ModelRotation {
 public:
  // InvalidArgument when an outlier count is outside [0, width) or the orders do not match
  // the spec (present exactly where a count is > 0, permutations of the right widths, one
  // per layer); Unimplemented (naming the width) when a rotated width m has no (blocked)
  // Hadamard transform in kernels/rotation.
  static absl::StatusOr<ModelRotation> Create(const LlamaConfig& config, const RotationSpec& spec,
                                              RotationOrders orders = {});

  const RotationSpec& spec() const { return spec_; }
  const RotationOrders& orders() const { return orders_; }
  // T of each rotation (over its m rotated channels).
  const kernels::HadamardTransform& residual() const { return residual_; }
  const kernels::HadamardTransform* attn_out() const { return attn_out_ ? &*attn_out_ : nullptr; }
  const kernels::HadamardTransform* silu_mul() const { return silu_mul_ ? &*silu_mul_ : nullptr; }
  int hidden() const { return hidden_; }

  // In the original channel order, x [rows, width] <- M x (transpose: Mᵀ x) for M = R, or
  // M_o / M_d of `layer` (REQUIRES attn_out() / silu_mul() not null). The reference
  // arithmetic of kernels/rotation (scalar); `scratch` grows as needed.
  void RotateResidual(float* x, int64_t rows, bool transpose) const;
  void RotateAttnOut(int layer, float* x, int64_t rows) const;
  void RotateSiluMul(int layer, float* x, int64_t rows) const;

  // Over the transforms and orders, as 16 lowercase hex digits: what a checkpoint records;
  // a reader that rebuilds a different rotation refuses it.
  std::string Fingerprint() const;

  // Copies every layer's attn_norm and ffn_norm scale (any stored dtype, as F32) from
  // `base`, the model whose norms are (or will be) folded. InvalidArgument naming the
  // tensor when one is missing or not [hidden].
  absl::Status SetFoldedNorms(const ModelSource& base);
  bool has_folded_norms() const { return !attn_norm_.empty(); }
  int n_folded_layers() const { return static_cast<int>(attn_norm_.size()); }
  // [hidden] each; REQUIRES has_folded_norms() and layer < n_folded_layers().
  const std::vector<float>& attn_norm(int layer) const { return attn_norm_[layer]; }
  const std::vector<float>& ffn_norm(int layer) const { return ffn_norm_[layer]; }

  // [hidden] ones: the scale a rotated model's layer norms run with.
  const std::vector<float>& unit_norm() const { return unit_; }

 private:
  ModelRotation(RotationSpec spec, kernels::HadamardTransform residual)
      : spec_(spec), residual_(std::move(residual)) {}

  RotationSpec spec_;
  RotationOrders orders_;
  int hidden_ = 0, n_layers_ = 0;
  kernels::HadamardTransform residual_;
  std::optional<kernels::HadamardTransform> attn_out_, silu_mul_;
  std::vector<std::vector<float>> attn_norm_, ffn_norm_;  // [n_layers][hidden]
  std::vector<float> unit_;
};

// x [rows, width] <- Pᵀ blockdiag(T, I) P x (transpose: with Tᵀ) for P = order (empty:
// identity), T over the first t.n() permuted channels. The building block of the above.
void ApplyPartialRotation(const kernels::HadamardTransform& t, const std::vector<int32_t>& order,
                          int width, float* x, int64_t rows, bool transpose);

}  // namespace loom

#endif  // LOOM_MODELS_ROTATION_MODEL_ROTATION_H_
