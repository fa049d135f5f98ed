#include "models/lora/adapter_rotation.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/dtype.h"

namespace loom {
namespace {

bool ReadsNormedResidual(LoraTarget t) {
  return t == LoraTarget::kQ || t == LoraTarget::kK || t == LoraTarget::kV ||
         t == LoraTarget::kGate || t == LoraTarget::kUp;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoraAdapter>> RotateLoraAdapter(const LoraAdapter& adapter,
                                                               const ModelRotation& rot) {
  if (!rot.has_folded_norms()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "adapter %s: the rotated model's norm scales are unknown (no folded norms)", adapter.id()));
  }
  const int hidden = rot.hidden();
  const std::vector<LoraProjectionInfo>& infos = adapter.projections();
  absl::StatusOr<std::unique_ptr<LoraAdapter>> out = LoraAdapter::Create(
      adapter.id(), adapter.source(), adapter.format(), adapter.n_layers(), infos);
  if (!out.ok()) return out.status();
  std::vector<float> buf;
  for (size_t i = 0; i < infos.size(); ++i) {
    const LoraProjectionInfo& p = infos[i];
    const bool normed = ReadsNormedResidual(p.target);
    const bool writes_residual = p.target == LoraTarget::kO || p.target == LoraTarget::kDown;
    const kernels::HadamardTransform* online =
        normed ? nullptr : p.target == LoraTarget::kO ? rot.attn_out() : rot.silu_mul();
    const int online_width =
        online == nullptr ? 0
        : online->n() + (p.target == LoraTarget::kO ? rot.spec().attn_out_outliers
                                                    : rot.spec().silu_mul_outliers);
    if ((normed && p.h_in != hidden) || (online != nullptr && online_width != p.h_in) ||
        (writes_residual && p.h_out != hidden)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "adapter %s: layer %d %s is %d -> %d, which the rotation (hidden %d) does not fit",
          adapter.id(), p.layer, PeftModuleName(p.target), p.h_in, p.h_out, hidden));
    }
    if (p.layer < 0 || p.layer >= rot.n_folded_layers()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "adapter %s: layer %d has no folded norm in the rotation", adapter.id(), p.layer));
    }
    // A' rows: each row a -> T (g ⊙ a) (g: the layer's norm scale for normed inputs).
    const uint16_t* a = adapter.a(i);
    uint16_t* a2 = (*out)->mutable_a(i);
    const size_t na = static_cast<size_t>(p.rank) * p.h_in;
    buf.resize(na);
    for (size_t j = 0; j < na; ++j) buf[j] = Bf16ToFp32(a[j]);
    if (normed) {
      const std::vector<float>& g = p.target == LoraTarget::kGate || p.target == LoraTarget::kUp
                                        ? rot.ffn_norm(p.layer)
                                        : rot.attn_norm(p.layer);
      for (int r = 0; r < p.rank; ++r) {
        for (int j = 0; j < p.h_in; ++j) buf[static_cast<size_t>(r) * p.h_in + j] *= g[j];
      }
    }
    if (normed) {
      rot.RotateResidual(buf.data(), p.rank, /*transpose=*/false);
    } else if (p.target == LoraTarget::kO && online != nullptr) {
      rot.RotateAttnOut(p.layer, buf.data(), p.rank);
    } else if (online != nullptr) {
      rot.RotateSiluMul(p.layer, buf.data(), p.rank);
    }
    for (size_t j = 0; j < na; ++j) a2[j] = Fp32ToBf16(buf[j]);
    // B' = R B for o and down: every column (length hidden) -> R column.
    const uint16_t* b = adapter.b(i);
    uint16_t* b2 = (*out)->mutable_b(i);
    const size_t nb = static_cast<size_t>(p.h_out) * p.rank;
    if (!writes_residual) {
      std::copy(b, b + nb, b2);
      continue;
    }
    buf.resize(nb);
    for (int r = 0; r < p.rank; ++r) {  // buf [rank, hidden] = Bᵀ
      for (int j = 0; j < p.h_out; ++j) {
        buf[static_cast<size_t>(r) * p.h_out + j] = Bf16ToFp32(b[static_cast<size_t>(j) * p.rank + r]);
      }
    }
    rot.RotateResidual(buf.data(), p.rank, /*transpose=*/false);
    for (int r = 0; r < p.rank; ++r) {
      for (int j = 0; j < p.h_out; ++j) {
        b2[static_cast<size_t>(j) * p.rank + r] = Fp32ToBf16(buf[static_cast<size_t>(r) * p.h_out + j]);
      }
    }
  }
  return out;
}

}  // namespace loom
