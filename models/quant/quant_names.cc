#include "models/quant/quant_names.h"

#include "absl/strings/str_cat.h"

namespace loom::quant {

const char* QuantActivationName(QuantActivation a) {
  switch (a) {
    case QuantActivation::kAttnNorm: return "attn_norm";
    case QuantActivation::kAttnOut: return "attn_out";
    case QuantActivation::kFfnNorm: return "ffn_norm";
    case QuantActivation::kSiluMul: return "silu_mul";
  }
  return "?";
}

const char* QuantProjectionName(QuantProjection p) {
  switch (p) {
    case QuantProjection::kQ: return "attn_q";
    case QuantProjection::kK: return "attn_k";
    case QuantProjection::kV: return "attn_v";
    case QuantProjection::kO: return "attn_output";
    case QuantProjection::kGate: return "ffn_gate";
    case QuantProjection::kUp: return "ffn_up";
    case QuantProjection::kDown: return "ffn_down";
  }
  return "?";
}

QuantActivation InputOf(QuantProjection p) {
  switch (p) {
    case QuantProjection::kQ:
    case QuantProjection::kK:
    case QuantProjection::kV: return QuantActivation::kAttnNorm;
    case QuantProjection::kO: return QuantActivation::kAttnOut;
    case QuantProjection::kGate:
    case QuantProjection::kUp: return QuantActivation::kFfnNorm;
    case QuantProjection::kDown: return QuantActivation::kSiluMul;
  }
  return QuantActivation::kAttnNorm;
}

std::string QuantTensorName(int layer, QuantProjection p, const std::string& part) {
  return absl::StrCat("blk.", layer, ".", QuantProjectionName(p), ".", part);
}

std::string PermTensorName(int layer, QuantActivation a) {
  return absl::StrCat("blk.", layer, ".", QuantActivationName(a), ".perm");
}

std::string BaseWeightName(int layer, QuantProjection p) {
  return absl::StrCat("blk.", layer, ".", QuantProjectionName(p), ".weight");
}

}  // namespace loom::quant
