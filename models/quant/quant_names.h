// Names shared by the quantizer, its checkpoint and the runtime: the four quantized
// activations of a Llama layer (each with its own channel permutation) and the seven
// projections that read them.
#ifndef LOOM_MODELS_QUANT_QUANT_NAMES_H_
#define LOOM_MODELS_QUANT_QUANT_NAMES_H_

#include <string>
#include <string_view>

namespace loom::quant {

// The inputs of the linear layers (models/llama's TapPoint, in the same order):
// kAttnNorm = RMSNorm output feeding q/k/v, kAttnOut = attention output feeding o,
// kFfnNorm = RMSNorm output feeding gate/up, kSiluMul = silu(gate)*up feeding down.
enum class QuantActivation : int { kAttnNorm = 0, kAttnOut, kFfnNorm, kSiluMul };
inline constexpr int kNumQuantActivations = 4;

// The projections, in loom::Projection's order (models/llama/adapter_weights.h).
enum class QuantProjection : int { kQ = 0, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumQuantProjections = 7;

// "attn_norm", "attn_out", "ffn_norm", "silu_mul" (the JSON keys and tensor prefixes).
const char* QuantActivationName(QuantActivation a);
// GGUF names: "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down".
const char* QuantProjectionName(QuantProjection p);
// The activation a projection reads.
QuantActivation InputOf(QuantProjection p);

// Tensor names of the checkpoint (model.safetensors):
//   "blk.{layer}.{projection}.{part}" with part in qweight, scales, qweight_outlier,
//   outlier_scales; "blk.{layer}.{activation}.perm".
std::string QuantTensorName(int layer, QuantProjection p, const std::string& part);
std::string PermTensorName(int layer, QuantActivation a);
// The base model's float weight: "blk.{layer}.{projection}.weight".
std::string BaseWeightName(int layer, QuantProjection p);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_QUANT_NAMES_H_
