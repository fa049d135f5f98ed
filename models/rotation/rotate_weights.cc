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

// w [rows, cols] <- w with every row r replaced by T (g ⊙ r) (g nullable: ones).
void RotateRows(const kernels::HadamardTransform& t, const float* g, float* w, int64_t rows) {
  const int n = t.n();
  if (g != nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int j = 0; j < n; ++j) w[r * n + j] *= g[j];
    }
  }
  t.Apply(w, rows);
}

// w [rows, cols] <- T w (T [rows, rows] acting on every column).
void RotateColumns(const kernels::HadamardTransform& t, float* w, int64_t cols) {
  const int64_t rows = t.n();
  std::vector<float> tr(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) tr[c * rows + r] = w[r * cols + c];
  }
  t.Apply(tr.data(), cols);
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
  if (rot.residual().n() != c.hidden) {
    return absl::InvalidArgumentError(absl::StrCat("the rotation is for hidden ", rot.residual().n(),
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
      RotateRows(rot.residual(), in.g->data(), *w, in.rows);
    }
    struct Out { const char* name; int64_t cols; const kernels::HadamardTransform* online; };
    const Out outputs[] = {{"attn_output", qd, rot.attn_out()},
                           {"ffn_down", c.intermediate, rot.silu_mul()}};
    for (const Out& o : outputs) {
      absl::StatusOr<float*> w = MutableF32(f32, p + o.name + ".weight", c.hidden, o.cols);
      if (!w.ok()) return w.status();
      if (o.online != nullptr) RotateRows(*o.online, nullptr, *w, c.hidden);
      RotateColumns(rot.residual(), *w, o.cols);
    }
    for (const char* norm : {"attn_norm", "ffn_norm"}) {
      absl::StatusOr<float*> g = MutableF32(f32, p + norm + ".weight", 1, c.hidden);
      if (!g.ok()) return g.status();
      for (int j = 0; j < c.hidden; ++j) (*g)[j] = 1.0f;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ModelRotation>> RotateF32Model(const RotationSpec& spec,
                                                                    ModelSource* f32) {
  absl::StatusOr<ModelRotation> rot = ModelRotation::Create(f32->config(), spec);
  if (!rot.ok()) return rot.status();
  if (absl::Status s = rot->SetFoldedNorms(*f32); !s.ok()) return s;
  if (absl::Status s = RotateF32Weights(*rot, f32); !s.ok()) return s;
  return std::make_shared<const ModelRotation>(*std::move(rot));
}

}  // namespace loom
