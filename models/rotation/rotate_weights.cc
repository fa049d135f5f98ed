#include "models/rotation/rotate_weights.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace loom {
namespace {

// The F32 data of tensor `name` [rows, cols], writable: the source's own buffer when it
// owns one, else a fresh owned copy the tensor is re-pointed to.
absl::StatusOr<float*> MutableF32(ModelSource* s, const std::string& name, int64_t rows,
                                  int64_t cols) {
  auto it = s->tensors_.find(name);
  if (it == s->tensors_.end()) return absl::InvalidArgumentError(absl::StrCat("no tensor ", name));
  WeightTensor& t = it->second;
  if (t.dtype != DType::kF32 || t.rows() != rows || t.cols() != cols ||
      t.nbytes != static_cast<size_t>(rows * cols) * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected F32 [", rows, ", ", cols, "] to rotate"));
  }
  for (std::vector<uint8_t>& b : s->owned_) {
    if (b.data() == t.data) return reinterpret_cast<float*>(b.data());
  }
  std::vector<uint8_t> copy(t.data, t.data + t.nbytes);
  s->owned_.push_back(std::move(copy));
  t.data = s->owned_.back().data();
  return reinterpret_cast<float*>(s->owned_.back().data());
}

// w [rows, n] <- w ⊙ g per row (g: [n]).
void ScaleColumns(const std::vector<float>& g, float* w, int64_t rows) {
  const int64_t n = static_cast<int64_t>(g.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) w[r * n + j] *= g[j];
  }
}

// w [hidden, cols] <- R w (R acting on every column).
void RotateColumns(const ModelRotation& rot, float* w, int64_t cols) {
  const int64_t rows = rot.hidden();
  std::vector<float> tr(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) tr[c * rows + r] = w[r * cols + c];
  }
  rot.RotateResidual(tr.data(), cols, /*transpose=*/false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) w[r * cols + c] = tr[c * rows + r];
  }
}

}  // namespace

absl::Status RotateF32Weights(const ModelRotation& rot, ModelSource* f32) {
  const LlamaConfig& c = f32->config();
  if (!rot.has_folded_norms()) {
    return absl::FailedPreconditionError("RotateF32Weights: the rotation has no folded norms");
  }
  if (rot.hidden() != c.hidden) {
    return absl::InvalidArgumentError(absl::StrCat("the rotation is for hidden ", rot.hidden(),
                                                   ", the model has ", c.hidden));
  }
  const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    struct In { const char* name; int64_t rows; const std::vector<float>* g; };
    const In inputs[] = {{"attn_q", qd, &rot.attn_norm(l)},
                         {"attn_k", kvd, &rot.attn_norm(l)},
                         {"attn_v", kvd, &rot.attn_norm(l)},
                         {"ffn_gate", c.intermediate, &rot.ffn_norm(l)},
                         {"ffn_up", c.intermediate, &rot.ffn_norm(l)}};
    for (const In& in : inputs) {
      absl::StatusOr<float*> w = MutableF32(f32, p + in.name + ".weight", in.rows, c.hidden);
      if (!w.ok()) return w.status();
      ScaleColumns(*in.g, *w, in.rows);
      rot.RotateResidual(*w, in.rows, /*transpose=*/false);  // rows w -> R (g ⊙ w)
    }
    absl::StatusOr<float*> o = MutableF32(f32, p + "attn_output.weight", c.hidden, qd);
    if (!o.ok()) return o.status();
    if (rot.attn_out() != nullptr) rot.RotateAttnOut(l, *o, c.hidden);  // rows w -> M_o w
    RotateColumns(rot, *o, qd);
    absl::StatusOr<float*> d = MutableF32(f32, p + "ffn_down.weight", c.hidden, c.intermediate);
    if (!d.ok()) return d.status();
    if (rot.silu_mul() != nullptr) rot.RotateSiluMul(l, *d, c.hidden);
    RotateColumns(rot, *d, c.intermediate);
    for (const char* norm : {"attn_norm", "ffn_norm"}) {
      absl::StatusOr<float*> g = MutableF32(f32, p + norm + ".weight", 1, c.hidden);
      if (!g.ok()) return g.status();
      for (int j = 0; j < c.hidden; ++j) (*g)[j] = 1.0f;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ModelRotation>> RotateF32Model(const RotationSpec& spec,
                                                                    ModelSource* f32,
                                                                    RotationOrders orders) {
  absl::StatusOr<ModelRotation> rot = ModelRotation::Create(f32->config(), spec, std::move(orders));
  if (!rot.ok()) return rot.status();
  if (absl::Status s = rot->SetFoldedNorms(*f32); !s.ok()) return s;
  if (absl::Status s = RotateF32Weights(*rot, f32); !s.ok()) return s;
  return std::make_shared<const ModelRotation>(*std::move(rot));
}

}  // namespace loom
