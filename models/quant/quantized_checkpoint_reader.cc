// QuantizedCheckpoint::Open: loom_quant.json + model.safetensors -> validated views.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
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

absl::Status QuantizedCheckpoint::Load() {
  const std::string where = dir_ + "/" + kQuantTensorsName;
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  std::set<std::string> used;
  // The tensor `name` with dtype `dtype` and exactly `shape`; 4-byte tensors realigned.
  auto get = [&](const std::string& name, const char* dtype,
                 const std::vector<int64_t>& shape) -> absl::StatusOr<const uint8_t*> {
    auto it = file_->tensors().find(name);
    if (it == file_->tensors().end()) return bad("missing tensor " + name);
    const SafetensorsTensor& t = it->second;
    if (t.dtype_name != dtype) {
      return bad(absl::StrCat(name, " has dtype ", t.dtype_name, ", expected ", dtype));
    }
    if (t.shape != shape) {
      std::string got, want;
      for (int64_t d : t.shape) absl::StrAppend(&got, got.empty() ? "" : ", ", d);
      for (int64_t d : shape) absl::StrAppend(&want, want.empty() ? "" : ", ", d);
      return bad(absl::StrCat(name, " has shape [", got, "], expected [", want, "]"));
    }
    used.insert(name);
    if (SafetensorsDTypeSize(dtype) == 4 && reinterpret_cast<uintptr_t>(t.data) % 4 != 0) {
      owned_.emplace_back(t.nbytes / 4);
      std::memcpy(owned_.back().data(), t.data, t.nbytes);
      return reinterpret_cast<const uint8_t*>(owned_.back().data());
    }
    return t.data;
  };
  // Rows of a tensor (its first dimension), for the projections whose rows the file sets.
  auto rows_of = [&](const std::string& name) -> absl::StatusOr<int64_t> {
    auto it = file_->tensors().find(name);
    if (it == file_->tensors().end()) return bad("missing tensor " + name);
    if (it->second.shape.size() != 2 || it->second.shape[0] <= 0) {
      return bad(name + " is not a non-empty 2-D tensor");
    }
    return it->second.shape[0];
  };
  auto finite_scales = [&](const std::string& name, const float* s, int64_t n) -> absl::Status {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(s[i]) || s[i] < 0) {
        return bad(absl::StrCat(name, " element ", i, " is ", s[i], " (must be finite, >= 0)"));
      }
    }
    return absl::OkStatus();
  };

  const QuantizedCheckpointMeta& m = meta_;
  std::array<int, kNumQuantActivations> k{};
  std::array<int64_t, kNumQuantProjections> rows{};
  layers_.resize(m.n_layers);
  for (int i = 0; i < m.n_layers; ++i) {
    QuantizedLayerView& lv = layers_[i];
    for (int a = 0; a < kNumQuantActivations; ++a) {
      const std::string name = PermTensorName(i, static_cast<QuantActivation>(a));
      auto it = file_->tensors().find(name);
      if (it == file_->tensors().end()) return bad("missing tensor " + name);
      if (i == 0) {
        if (it->second.shape.size() != 1 || it->second.shape[0] <= 0 ||
            it->second.shape[0] > (int64_t{1} << 24)) {
          return bad(name + " is not a non-empty 1-D tensor");
        }
        k[a] = static_cast<int>(it->second.shape[0]);
        if (m.outliers[a] >= k[a]) {
          return bad(absl::StrCat("outliers.", QuantActivationName(static_cast<QuantActivation>(a)),
                                  " = ", m.outliers[a], " leaves no normal channel of ", k[a]));
        }
      }
      auto p = get(name, "I32", {k[a]});
      if (!p.ok()) return p.status();
      lv.perm[a] = reinterpret_cast<const int32_t*>(*p);
      lv.k[a] = k[a];
      if (!IsPermutation(lv.perm[a], k[a])) return bad(name + " is not a permutation of 0.." + std::to_string(k[a] - 1));
    }
    for (int p = 0; p < kNumQuantProjections; ++p) {
      const auto proj = static_cast<QuantProjection>(p);
      const int a = static_cast<int>(InputOf(proj));
      const kernels::quant::QuantSpec spec = m.Spec(proj, k[a]);
      if (absl::Status s = spec.Validate(); !s.ok()) return bad(std::string(s.message()));
      const std::string qname = QuantTensorName(i, proj, "qweight");
      if (i == 0) {
        auto r = rows_of(qname);
        if (!r.ok()) return r.status();
        rows[p] = *r;
      }
      kernels::quant::AtomWeightView& w = lv.proj[p];
      w.spec = spec;
      w.rows = rows[p];
      auto q = get(qname, m.weight_bits == 4 ? "U8" : "I8",
                   {rows[p], static_cast<int64_t>(spec.weight_row_bytes())});
      if (!q.ok()) return q.status();
      w.q = *q;
      const std::string sname = QuantTensorName(i, proj, "scales");
      auto s = get(sname, "F32", {rows[p], spec.n_groups()});
      if (!s.ok()) return s.status();
      w.scales = reinterpret_cast<const float*>(*s);
      if (absl::Status st = finite_scales(sname, w.scales, rows[p] * spec.n_groups()); !st.ok()) return st;
      if (spec.n_outliers > 0) {
        auto qo = get(QuantTensorName(i, proj, "qweight_outlier"), "I8", {rows[p], spec.n_outliers});
        if (!qo.ok()) return qo.status();
        w.q_outlier = reinterpret_cast<const int8_t*>(*qo);
        const std::string oname = QuantTensorName(i, proj, "outlier_scales");
        auto os = get(oname, "F32", {rows[p]});
        if (!os.ok()) return os.status();
        w.outlier_scales = reinterpret_cast<const float*>(*os);
        if (absl::Status st = finite_scales(oname, w.outlier_scales, rows[p]); !st.ok()) return st;
      }
    }
  }
  // Rows fixed by the activations: gate/up produce silu_mul's channels, o and down the
  // residual (attn_norm's width), k and v the same width.
  using P = QuantProjection;
  auto row_check = [&](P p, int64_t want, const char* why) -> absl::Status {
    if (rows[static_cast<int>(p)] != want) {
      return bad(absl::StrCat(QuantTensorName(0, p, "qweight"), " has ", rows[static_cast<int>(p)],
                              " rows, expected ", want, " (", why, ")"));
    }
    return absl::OkStatus();
  };
  const int hidden = k[static_cast<int>(QuantActivation::kAttnNorm)];
  const int inter = k[static_cast<int>(QuantActivation::kSiluMul)];
  for (absl::Status s : {row_check(P::kGate, inter, "silu_mul width"),
                         row_check(P::kUp, inter, "silu_mul width"),
                         row_check(P::kO, hidden, "attn_norm width"),
                         row_check(P::kDown, hidden, "attn_norm width"),
                         row_check(P::kV, rows[static_cast<int>(P::kK)], "attn_k rows")}) {
    if (!s.ok()) return s;
  }
  if (k[static_cast<int>(QuantActivation::kFfnNorm)] != hidden) {
    return bad(absl::StrCat("ffn_norm width ", k[static_cast<int>(QuantActivation::kFfnNorm)],
                            " != attn_norm width ", hidden));
  }
  for (const auto& [name, t] : file_->tensors()) {
    if (used.count(name) == 0) return bad("unexpected tensor " + name);
  }
  return absl::OkStatus();
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

}  // namespace loom::quant
