// Adapters for a rotated base model (QuaRot, models/rotation/model_rotation.h). A rotated
// model's projections read R·RMSNorm(x) (unit scale) instead of RMSNorm(x)·g, o and down
// read M_o a and M_d h, and o/down write R·y into the rotated residual stream. So that an
// adapter adds exactly what it adds to the unrotated model, its copy for the rotated model
// is (column-vector convention, A [rank, h_in], B [h_out, rank], y += s B A x):
//   q, k, v:   A' = A diag(g_attn) Rᵀ        B' = B
//   gate, up:  A' = A diag(g_ffn) Rᵀ         B' = B
//   o:         A' = A M_oᵀ                   B' = R B
//   down:      A' = A M_dᵀ                   B' = R B      (M = I when not online)
// computed once at load in F32 from the BF16 weights and rounded to BF16 once: the copy's
// products B'A' equal the rotated B A to BF16 precision (about 2^-9 relative per weight),
// where a permuted copy (adapter_permutation.h) is exact.
#ifndef LOOM_MODELS_LORA_ADAPTER_ROTATION_H_
#define LOOM_MODELS_LORA_ADAPTER_ROTATION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/lora/lora_adapter.h"
#include "models/rotation/model_rotation.h"

namespace loom {

// The rotated copy (same id, source, format, projections, ranks and scales).
// FailedPrecondition when `rotation` has no folded norms (ModelRotation::SetFoldedNorms);
// InvalidArgument when a projection's widths do not match the rotation's or the adapter
// has a layer the rotation has no norms for.
absl::StatusOr<std::unique_ptr<LoraAdapter>> RotateLoraAdapter(const LoraAdapter& adapter,
                                                               const ModelRotation& rotation);

}  // namespace loom

#endif  // LOOM_MODELS_LORA_ADAPTER_ROTATION_H_
