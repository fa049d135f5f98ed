// QuantizedCheckpoint::Open: loom_quant.json + model.safetensors -> validated views.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/quant/channel_permutation.h"
#include "models/quant/quantized_checkpoint.h"
#include "models/quant/sha256.h"
#include "models/weights/json_file.h"
#include "models/weights/safetensors_file.h"

namespace loom::quant {

QuantizedCheckpoint::QuantizedCheckpoint(QuantizedCheckpoint&&) noexcept = default;
QuantizedCheckpoint& QuantizedCheckpoint::operator=(QuantizedCheckpoint&&) noexcept = default;
QuantizedCheckpoint::~QuantizedCheckpoint() = default;

absl::StatusOr<QuantizedCheckpoint> QuantizedCheckpoint::Open(const std::string& dir) {
  QuantizedCheckpoint c;
  c.dir_ = dir;
  const std::string json_path = dir + "/" + kQuantJsonName;
  if (!FileExists(json_path)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not a Loom quantized checkpoint: no ",
                                            kQuantJsonName));
  }
  absl::StatusOr<nlohmann::json> j = ReadJsonObject(json_path);
  if (!j.ok()) return j.status();
  absl::StatusOr<QuantizedCheckpointMeta> meta = QuantizedCheckpointMeta::FromJson(*j);
  if (!meta.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": ", meta.status().message()));
  }
  c.meta_ = *std::move(meta);
  const std::string st_path = dir + "/" + kQuantTensorsName;
  if (!FileExists(st_path)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no ", kQuantTensorsName));
  }
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(st_path);
  if (!f.ok()) return f.status();
  c.file_ = *std::move(f);
  if (absl::Status s = c.Load(); !s.ok()) return s;
  return c;
}

namespace {

using kernels::quant::AtomWeightView;
using kernels::quant::QuantSpec;

// Checked access to the tensors of model.safetensors; remembers which were read.
class TensorTable {
 public:
  TensorTable(const SafetensorsFile& f, std::string where,
              std::vector<std::vector<uint32_t>>* owned)
      : f_(f), where_(std::move(where)), owned_(owned) {}

  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", what));
  }

  // The tensor `name` with dtype `dtype` and exactly `shape`; 4-byte tensors that are not
  // 4-byte aligned in the file are copied.
  absl::StatusOr<const uint8_t*> Get(const std::string& name, const char* dtype,
                                     const std::vector<int64_t>& shape) {
    auto it = f_.tensors().find(name);
    if (it == f_.tensors().end()) return Bad("missing tensor " + name);
    const SafetensorsTensor& t = it->second;
    if (t.dtype_name != dtype) {
      return Bad(absl::StrCat(name, " has dtype ", t.dtype_name, ", expected ", dtype));
    }
    if (t.shape != shape) {
      return Bad(absl::StrCat(name, " has shape [", Dims(t.shape), "], expected [", Dims(shape), "]"));
    }
    used_.insert(name);
    if (SafetensorsDTypeSize(dtype) == 4 && reinterpret_cast<uintptr_t>(t.data) % 4 != 0) {
      owned_->emplace_back(t.nbytes / 4);
      std::memcpy(owned_->back().data(), t.data, t.nbytes);
      return reinterpret_cast<const uint8_t*>(owned_->back().data());
    }
    return t.data;
  }

  // The first dimension of `name`, which must have `rank` dimensions, the first in [1, 2^24].
  absl::StatusOr<int64_t> Dim0(const std::string& name, size_t rank) const {
    auto it = f_.tensors().find(name);
    if (it == f_.tensors().end()) return Bad("missing tensor " + name);
    const std::vector<int64_t>& s = it->second.shape;
    if (s.size() != rank || s[0] <= 0 || s[0] > (int64_t{1} << 24)) {
      return Bad(absl::StrCat(name, " is not a non-empty ", rank, "-D tensor"));
    }
    return s[0];
  }

  absl::Status CheckScales(const std::string& name, const float* s, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(s[i]) || s[i] < 0) {
        return Bad(absl::StrCat(name, " element ", i, " is ", s[i], " (must be finite, >= 0)"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckAllUsed() const {
    for (const auto& [name, t] : f_.tensors()) {
      if (used_.count(name) == 0) return Bad("unexpected tensor " + name);
    }
    return absl::OkStatus();
  }

 private:
  static std::string Dims(const std::vector<int64_t>& d) {
    std::string out;
    for (int64_t v : d) absl::StrAppend(&out, out.empty() ? "" : ", ", v);
    return out;
  }

  const SafetensorsFile& f_;
  const std::string where_;
  std::vector<std::vector<uint32_t>>* owned_;
  std::set<std::string> used_;
};

using Widths = std::array<int, kNumQuantActivations>;
using Rows = std::array<int64_t, kNumQuantProjections>;

// Channels per activation and rows per projection, from layer 0's tensors.
absl::Status ReadGeometry(const TensorTable& t, const QuantizedCheckpointMeta& m, Widths* k,
                          Rows* rows) {
  for (int a = 0; a < kNumQuantActivations; ++a) {
    absl::StatusOr<int64_t> n = t.Dim0(PermTensorName(0, static_cast<QuantActivation>(a)), 1);
    if (!n.ok()) return n.status();
    (*k)[a] = static_cast<int>(*n);
    if (m.outliers[a] >= (*k)[a]) {
      return t.Bad(absl::StrCat("outliers.", QuantActivationName(static_cast<QuantActivation>(a)),
                                " = ", m.outliers[a], " leaves no normal channel of ", (*k)[a]));
    }
  }
  for (int p = 0; p < kNumQuantProjections; ++p) {
    absl::StatusOr<int64_t> r = t.Dim0(QuantTensorName(0, static_cast<QuantProjection>(p), "qweight"), 2);
    if (!r.ok()) return r.status();
    (*rows)[p] = *r;
  }
  return absl::OkStatus();
}

// Rows fixed by the activations: gate/up produce silu_mul's channels, o and down the
// residual (attn_norm's width, = ffn_norm's), k and v the same width.
absl::Status CheckGeometry(const TensorTable& t, const Widths& k, const Rows& rows) {
  using A = QuantActivation;
  using P = QuantProjection;
  const int hidden = k[static_cast<int>(A::kAttnNorm)];
  const int inter = k[static_cast<int>(A::kSiluMul)];
  if (k[static_cast<int>(A::kFfnNorm)] != hidden) {
    return t.Bad(absl::StrCat("ffn_norm width ", k[static_cast<int>(A::kFfnNorm)],
                              " != attn_norm width ", hidden));
  }
  const std::tuple<P, int64_t, const char*> want[] = {
      {P::kGate, inter, "silu_mul width"}, {P::kUp, inter, "silu_mul width"},
      {P::kO, hidden, "attn_norm width"}, {P::kDown, hidden, "attn_norm width"},
      {P::kV, rows[static_cast<int>(P::kK)], "attn_k rows"}};
  for (const auto& [p, n, why] : want) {
    if (rows[static_cast<int>(p)] != n) {
      return t.Bad(absl::StrCat(QuantTensorName(0, p, "qweight"), " has ", rows[static_cast<int>(p)],
                                " rows, expected ", n, " (", why, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status LoadProjection(TensorTable& t, int i, QuantProjection p, const QuantSpec& spec,
                            int64_t rows, int w_bits, AtomWeightView* w) {
  if (absl::Status s = spec.Validate(); !s.ok()) return t.Bad(std::string(s.message()));
  w->spec = spec;
  w->rows = rows;
  auto q = t.Get(QuantTensorName(i, p, "qweight"), w_bits == 4 ? "U8" : "I8",
                 {rows, static_cast<int64_t>(spec.weight_row_bytes())});
  if (!q.ok()) return q.status();
  w->q = *q;
  const std::string sname = QuantTensorName(i, p, "scales");
  auto s = t.Get(sname, "F32", {rows, spec.n_groups()});
  if (!s.ok()) return s.status();
  w->scales = reinterpret_cast<const float*>(*s);
  if (absl::Status st = t.CheckScales(sname, w->scales, rows * spec.n_groups()); !st.ok()) return st;
  if (spec.n_outliers == 0) return absl::OkStatus();
  auto qo = t.Get(QuantTensorName(i, p, "qweight_outlier"), "I8", {rows, spec.n_outliers});
  if (!qo.ok()) return qo.status();
  w->q_outlier = reinterpret_cast<const int8_t*>(*qo);
  const std::string oname = QuantTensorName(i, p, "outlier_scales");
  auto os = t.Get(oname, "F32", {rows});
  if (!os.ok()) return os.status();
  w->outlier_scales = reinterpret_cast<const float*>(*os);
  return t.CheckScales(oname, w->outlier_scales, rows);
}

absl::Status LoadLayer(TensorTable& t, const QuantizedCheckpointMeta& m, int i, const Widths& k,
                       const Rows& rows, QuantizedLayerView* lv) {
  for (int a = 0; a < kNumQuantActivations; ++a) {
    const std::string name = PermTensorName(i, static_cast<QuantActivation>(a));
    auto p = t.Get(name, "I32", {k[a]});
    if (!p.ok()) return p.status();
    lv->perm[a] = reinterpret_cast<const int32_t*>(*p);
    lv->k[a] = k[a];
    if (!IsPermutation(lv->perm[a], k[a])) {
      return t.Bad(absl::StrCat(name, " is not a permutation of 0..", k[a] - 1));
    }
  }
  for (int p = 0; p < kNumQuantProjections; ++p) {
    const auto proj = static_cast<QuantProjection>(p);
    const QuantSpec spec = m.Spec(proj, k[static_cast<int>(InputOf(proj))]);
    if (absl::Status s = LoadProjection(t, i, proj, spec, rows[p], m.weight_bits, &lv->proj[p]);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status QuantizedCheckpoint::Load() {
  TensorTable t(*file_, dir_ + "/" + kQuantTensorsName, &owned_);
  Widths k{};
  Rows rows{};
  if (absl::Status s = ReadGeometry(t, meta_, &k, &rows); !s.ok()) return s;
  layers_.resize(meta_.n_layers);
  for (int i = 0; i < meta_.n_layers; ++i) {
    if (absl::Status s = LoadLayer(t, meta_, i, k, rows, &layers_[i]); !s.ok()) return s;
  }
  if (absl::Status s = CheckGeometry(t, k, rows); !s.ok()) return s;
  return t.CheckAllUsed();
}

absl::Status QuantizedCheckpoint::CheckConfig(const LlamaConfig& c) const {
  using A = QuantActivation;
  using P = QuantProjection;
  auto fail = [&](const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrCat("quantized checkpoint ", dir_, " does not fit the base model: ", what));
  };
  if (meta_.n_layers != c.n_layers) {
    return fail(absl::StrCat(meta_.n_layers, " layers vs ", c.n_layers));
  }
  const QuantizedLayerView& l = layers_[0];
  const int q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const std::pair<int, int> ks[] = {{l.k[static_cast<int>(A::kAttnNorm)], c.hidden},
                                    {l.k[static_cast<int>(A::kAttnOut)], q_dim},
                                    {l.k[static_cast<int>(A::kFfnNorm)], c.hidden},
                                    {l.k[static_cast<int>(A::kSiluMul)], c.intermediate}};
  for (int a = 0; a < kNumQuantActivations; ++a) {
    if (ks[a].first != ks[a].second) {
      return fail(absl::StrCat(QuantActivationName(static_cast<A>(a)), " has ", ks[a].first,
                               " channels, the model ", ks[a].second));
    }
  }
  if (meta_.rotation) {
    absl::StatusOr<ModelRotation> r = Rotation(c);
    if (!r.ok()) return r.status();
  }
  const int64_t want_rows[] = {q_dim, kv_dim, kv_dim, c.hidden, c.intermediate, c.intermediate,
                               c.hidden};
  for (int p = 0; p < kNumQuantProjections; ++p) {
    if (l.proj[p].rows != want_rows[p]) {
      return fail(absl::StrCat(QuantProjectionName(static_cast<P>(p)), " has ", l.proj[p].rows,
                               " rows, the model ", want_rows[p]));
    }
  }
  return absl::OkStatus();
}

absl::Status QuantizedCheckpoint::CheckBaseModelFile(const std::string& path,
                                                     bool verify_sha256) const {
  namespace fs = std::filesystem;
  auto fail = [&](const std::string& what) {
    return absl::FailedPreconditionError(absl::StrCat("base model ", path, " is not the one ", dir_,
                                                      " was quantized from (", meta_.base_model.path,
                                                      "): ", what));
  };
  if (verify_sha256) {
    absl::StatusOr<FileDigest> d = DigestPath(path);
    if (!d.ok()) return d.status();
    if (d->bytes != meta_.base_model.bytes) {
      return fail(absl::StrCat(d->bytes, " bytes, recorded ", meta_.base_model.bytes));
    }
    if (d->sha256 != meta_.base_model.sha256) {
      return fail("sha256 " + d->sha256 + ", recorded " + meta_.base_model.sha256);
    }
    return absl::OkStatus();
  }
  std::error_code ec;
  int64_t bytes = 0;
  if (fs::is_directory(path, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
      if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
    }
  } else {
    bytes = static_cast<int64_t>(fs::file_size(path, ec));
  }
  if (ec) return absl::NotFoundError("cannot stat " + path + ": " + ec.message());
  if (bytes != meta_.base_model.bytes) {
    return fail(absl::StrCat(bytes, " bytes, recorded ", meta_.base_model.bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelRotation> QuantizedCheckpoint::Rotation(const LlamaConfig& c) const {
  if (!meta_.rotation) return absl::NotFoundError(dir_ + " is not a rotated checkpoint");
  const RotationSpec& spec = meta_.rotation->spec;
  RotationOrders orders;
  auto perm_of = [&](int layer, QuantActivation a) {
    const int k = layers_[layer].k[static_cast<int>(a)];
    const int32_t* p = layers_[layer].perm[static_cast<int>(a)];
    return std::vector<int32_t>(p, p + k);
  };
  if (spec.residual_outliers > 0) orders.residual = perm_of(0, QuantActivation::kAttnNorm);
  for (int l = 0; l < n_layers(); ++l) {
    if (spec.attn_out_outliers > 0) orders.attn_out.push_back(perm_of(l, QuantActivation::kAttnOut));
    if (spec.silu_mul_outliers > 0) orders.silu_mul.push_back(perm_of(l, QuantActivation::kSiluMul));
  }
  absl::StatusOr<ModelRotation> r = ModelRotation::Create(c, spec, std::move(orders));
  if (!r.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rotated checkpoint ", dir_, ": ", r.status().message()));
  }
  if (r->Fingerprint() != meta_.rotation->fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rotated checkpoint ", dir_, ": rotation mismatch: the checkpoint was written with "
        "rotation fingerprint ", meta_.rotation->fingerprint, ", this reader builds ",
        r->Fingerprint(), " from the same seed and options (a different Hadamard "
        "construction); refusing to run weights folded with another rotation"));
  }
  return r;
}

}  // namespace loom::quant
