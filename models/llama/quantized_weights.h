// The quantized linear layers of a Llama model (kernels/quant/atom_format.h): per layer the
// seven projections as AtomWeightViews and the four activation permutations. An overlay:
// embeddings, norms and the output head still come from the model's ModelSource.
//
// Channel orders (atom_format.h: permuted channel j reads original channel perm[j]):
//   attn_norm_perm [hidden]        input order of q, k, v
//   attn_out_perm  [n_heads*hd]    input order of o
//   ffn_norm_perm  [hidden]        input order of gate, up
//   silu_mul_perm  [intermediate]  input order of down, AND the stored output-row order of
//                                  gate and up (stored row j = original row perm[j]), so
//                                  SiLU(gate)*up comes out already in down's input order.
// q/k/v/o/down output rows are in the original order (rope and the residual stream).
#ifndef LOOM_MODELS_LLAMA_QUANTIZED_WEIGHTS_H_
#define LOOM_MODELS_LLAMA_QUANTIZED_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "kernels/quant/atom_format.h"
#include "models/model_config.h"
#include "models/rotation/model_rotation.h"

namespace loom {

struct QuantizedLayerWeights {
  kernels::quant::AtomWeightView q, k, v, o, gate, up, down;
  const int32_t* attn_norm_perm = nullptr;  // nullptr = identity
  const int32_t* attn_out_perm = nullptr;
  const int32_t* ffn_norm_perm = nullptr;
  const int32_t* silu_mul_perm = nullptr;
};

struct QuantizedWeights {
  kernels::quant::QuantScheme scheme = kernels::quant::QuantScheme::kNone;
  std::vector<QuantizedLayerWeights> layers;
  // The rotation folded into these weights (a rotated checkpoint), or null. When it has
  // an online M_d, gate/up rows are in the ORIGINAL order and silu_mul_perm is the order
  // down reads after M_d (see LlamaModel's rotated mode).
  std::shared_ptr<const ModelRotation> rotation;
  // Keeps the memory behind every view and permutation alive (a checkpoint mapping or
  // in-memory buffers); shared so that copies of the struct stay valid.
  std::shared_ptr<const void> owner;

  // OK when the layers fit `config`: n_layers layers; per projection rows and spec.k as
  // the base shapes; a valid spec with the scheme's bit widths; q/k/v one input spec,
  // gate/up one input spec; non-null weight pointers (outlier ones when n_outliers > 0);
  // every non-null permutation a permutation of [0, k). InvalidArgument naming the
  // layer and projection otherwise.
  absl::Status Validate(const LlamaConfig& config) const;
};

// Changes the activation precision of every layer to `scheme`'s (e.g. a W4A4 checkpoint run
// as W4A8). InvalidArgument when the weight bits differ (the weights cannot change) or
// scheme is kNone.
absl::Status OverrideScheme(kernels::quant::QuantScheme scheme, QuantizedWeights* w);

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_QUANTIZED_WEIGHTS_H_
