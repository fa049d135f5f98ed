// QuaRot for a Llama model (Ashkboos et al., "QuaRot: Outlier-Free 4-Bit Inference in
// Rotated LLMs", 2024): the orthogonal transforms a rotated model uses, and the RMSNorm
// scales folded into its linears. Conventions (column vectors, W [out, in]):
//
//   R   [hidden]        residual rotation: a randomized Hadamard T·diag(s) (s from the seed).
//                       The residual stream of a rotated model is x_r = R x.
//   M_o [n_heads*hd]    online Hadamard on o_proj's input (optional): a_r = M_o a.
//   M_d [intermediate]  online Hadamard on down_proj's input (optional): h_r = M_d h.
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
};

class ModelRotation {
 public:
  // Unimplemented (naming the width) when hidden, n_heads * head_dim (with
  // online_attn_out) or intermediate (with online_silu_mul) has no Hadamard matrix in
  // kernels/rotation/hadamard_matrix.h.
  static absl::StatusOr<ModelRotation> Create(const LlamaConfig& config, const RotationSpec& spec);

  const RotationSpec& spec() const { return spec_; }
  const kernels::HadamardTransform& residual() const { return residual_; }
  const kernels::HadamardTransform* attn_out() const { return attn_out_ ? &*attn_out_ : nullptr; }
  const kernels::HadamardTransform* silu_mul() const { return silu_mul_ ? &*silu_mul_ : nullptr; }

  // Over the three transforms (kernels' Fingerprint), as 16 lowercase hex digits: what a
  // checkpoint records; a reader that rebuilds a different rotation refuses it.
  std::string Fingerprint() const;

  // Copies every layer's attn_norm and ffn_norm scale (any stored dtype, as F32) from
  // `base`, the model whose norms are (or will be) folded. InvalidArgument naming the
  // tensor when one is missing or not [hidden].
  absl::Status SetFoldedNorms(const ModelSource& base);
  bool has_folded_norms() const { return !attn_norm_.empty(); }
  int n_folded_layers() const { return static_cast<int>(attn_norm_.size()); }
  // [hidden] each; REQUIRES has_folded_norms() and layer < n_layers.
  const std::vector<float>& attn_norm(int layer) const { return attn_norm_[layer]; }
  const std::vector<float>& ffn_norm(int layer) const { return ffn_norm_[layer]; }

  // [hidden] ones: the scale a rotated model's layer norms run with.
  const std::vector<float>& unit_norm() const { return unit_; }

 private:
  ModelRotation(RotationSpec spec, kernels::HadamardTransform residual)
      : spec_(spec), residual_(std::move(residual)) {}

  RotationSpec spec_;
  kernels::HadamardTransform residual_;
  std::optional<kernels::HadamardTransform> attn_out_, silu_mul_;
  std::vector<std::vector<float>> attn_norm_, ffn_norm_;  // [n_layers][hidden]
  std::vector<float> unit_;
};

}  // namespace loom

#endif  // LOOM_MODELS_ROTATION_MODEL_ROTATION_H_
