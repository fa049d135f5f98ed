#include "models/llama/quantized_loader.h"

#include <utility>

namespace loom {
namespace {

namespace kq = kernels::quant;
using quant::QuantActivation;
using quant::QuantProjection;

// Fills L's fields from per-projection views and per-activation perms.
void Assign(const std::array<kq::AtomWeightView, quant::kNumQuantProjections>& proj,
            const std::array<const int32_t*, quant::kNumQuantActivations>& perm,
            QuantizedLayerWeights* L) {
  auto P = [&](QuantProjection p) { return proj[static_cast<int>(p)]; };
  L->q = P(QuantProjection::kQ);
  L->k = P(QuantProjection::kK);
  L->v = P(QuantProjection::kV);
  L->o = P(QuantProjection::kO);
  L->gate = P(QuantProjection::kGate);
  L->up = P(QuantProjection::kUp);
  L->down = P(QuantProjection::kDown);
  L->attn_norm_perm = perm[static_cast<int>(QuantActivation::kAttnNorm)];
  L->attn_out_perm = perm[static_cast<int>(QuantActivation::kAttnOut)];
  L->ffn_norm_perm = perm[static_cast<int>(QuantActivation::kFfnNorm)];
  L->silu_mul_perm = perm[static_cast<int>(QuantActivation::kSiluMul)];
}

}  // namespace

absl::StatusOr<QuantizedWeights> LoadQuantizedWeights(const std::string& dir,
                                                      const ModelSource& base,
                                                      bool verify_sha256) {
  absl::StatusOr<quant::QuantizedCheckpoint> ck = quant::QuantizedCheckpoint::Open(dir);
  if (!ck.ok()) return ck.status();
  if (absl::Status s = ck->CheckConfig(base.config()); !s.ok()) return s;
  if (absl::Status s = ck->CheckBaseModelFile(base.path(), verify_sha256); !s.ok()) return s;
  std::shared_ptr<const ModelRotation> rotation;
  if (ck->meta().rotation) {
    absl::StatusOr<ModelRotation> r = ck->Rotation(base.config());
    if (!r.ok()) return r.status();
    if (absl::Status s = r->SetFoldedNorms(base); !s.ok()) return s;
    rotation = std::make_shared<const ModelRotation>(*std::move(r));
  }
  auto owned = std::make_shared<quant::QuantizedCheckpoint>(*std::move(ck));
  QuantizedWeights w;
  w.scheme = owned->meta().scheme;
  w.rotation = std::move(rotation);
  w.layers.resize(owned->n_layers());
  for (int l = 0; l < owned->n_layers(); ++l) {
    Assign(owned->layer(l).proj, owned->layer(l).perm, &w.layers[l]);
  }
  w.owner = std::move(owned);
  return w;
}

QuantizedWeights QuantizedWeightsFromLayers(
    std::shared_ptr<const std::vector<quant::QuantizedLayer>> layers, kq::QuantScheme scheme,
    std::shared_ptr<const ModelRotation> rotation) {
  QuantizedWeights w;
  w.scheme = scheme;
  w.rotation = std::move(rotation);
  w.layers.resize(layers->size());
  for (size_t l = 0; l < layers->size(); ++l) {
    const quant::QuantizedLayer& src = (*layers)[l];
    std::array<kq::AtomWeightView, quant::kNumQuantProjections> proj;
    for (int p = 0; p < quant::kNumQuantProjections; ++p) proj[p] = src.proj[p].view();
    std::array<const int32_t*, quant::kNumQuantActivations> perm{};
    for (int a = 0; a < quant::kNumQuantActivations; ++a) {
      perm[a] = src.perm[a].empty() ? nullptr : src.perm[a].data();
    }
    Assign(proj, perm, &w.layers[l]);
  }
  w.owner = std::move(layers);
  return w;
}

}  // namespace loom
