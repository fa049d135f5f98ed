// WriteQuantizedCheckpoint: model.safetensors (4-byte tensors first so every tensor is
// naturally aligned in the file), then loom_quant.json.
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/quant/channel_permutation.h"
#include "models/quant/quantized_checkpoint.h"
#include "models/weights/safetensors_writer.h"

namespace loom::quant {
namespace {

template <typename T>
SafetensorsEntry Entry(std::string name, const char* dtype, std::vector<int64_t> shape,
                       const std::vector<T>& v) {
  SafetensorsEntry e;
  e.name = std::move(name);
  e.dtype_name = dtype;
  e.shape = std::move(shape);
  e.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  return e;
}

absl::Status CheckLayer(const QuantizedCheckpointMeta& meta, int i, const QuantizedLayer& l) {
  for (int a = 0; a < kNumQuantActivations; ++a) {
    const std::vector<int32_t>& p = l.perm[a];
    if (p.empty() || !IsPermutation(p.data(), static_cast<int64_t>(p.size()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", i, ": ", PermTensorName(i, static_cast<QuantActivation>(a)),
                       " is not a permutation"));
    }
  }
  for (int p = 0; p < kNumQuantProjections; ++p) {
    const auto proj = static_cast<QuantProjection>(p);
    const kernels::quant::AtomWeight& w = l.proj[p];
    const int k = static_cast<int>(l.perm[static_cast<int>(InputOf(proj))].size());
    const kernels::quant::QuantSpec want = meta.Spec(proj, k);
    const std::string name = QuantTensorName(i, proj, "");
    if (w.spec != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": spec (k ", w.spec.k, ", outliers ", w.spec.n_outliers, ", group ", w.spec.group,
          ", bits ", w.spec.w_bits, "/", w.spec.a_bits, ") does not match the metadata (k ", k,
          ", outliers ", want.n_outliers, ", group ", want.group, ", bits ", want.w_bits, "/",
          want.a_bits, ")"));
    }
    if (absl::Status s = w.spec.Validate(); !s.ok()) return s;
    const int64_t r = w.rows;
    const size_t no = static_cast<size_t>(w.spec.n_outliers);
    if (r <= 0 || w.q.size() != r * w.spec.weight_row_bytes() ||
        w.scales.size() != static_cast<size_t>(r * w.spec.n_groups()) ||
        w.q_outlier.size() != r * no || w.outlier_scales.size() != (no > 0 ? r : 0)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": buffer sizes do not match ", r,
                                                     " rows of its spec"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteQuantizedCheckpoint(const std::string& dir, const QuantizedCheckpointMeta& meta,
                                      const std::vector<QuantizedLayer>& layers) {
  if (meta.n_layers != static_cast<int>(layers.size())) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: metadata says ", meta.n_layers,
                                                   " layers, ", layers.size(), " given"));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (absl::Status s = CheckLayer(meta, static_cast<int>(i), layers[i]); !s.ok()) return s;
  }
  std::vector<SafetensorsEntry> wide, narrow;  // 4-byte then 1-byte elements
  for (size_t li = 0; li < layers.size(); ++li) {
    const int i = static_cast<int>(li);
    const QuantizedLayer& l = layers[li];
    for (int a = 0; a < kNumQuantActivations; ++a) {
      wide.push_back(Entry(PermTensorName(i, static_cast<QuantActivation>(a)), "I32",
                           {static_cast<int64_t>(l.perm[a].size())}, l.perm[a]));
    }
    for (int p = 0; p < kNumQuantProjections; ++p) {
      const auto proj = static_cast<QuantProjection>(p);
      const kernels::quant::AtomWeight& w = l.proj[p];
      const int64_t r = w.rows;
      wide.push_back(Entry(QuantTensorName(i, proj, "scales"), "F32", {r, w.spec.n_groups()},
                           w.scales));
      narrow.push_back(Entry(QuantTensorName(i, proj, "qweight"), w.spec.w_bits == 4 ? "U8" : "I8",
                             {r, static_cast<int64_t>(w.spec.weight_row_bytes())}, w.q));
      if (w.spec.n_outliers > 0) {
        wide.push_back(Entry(QuantTensorName(i, proj, "outlier_scales"), "F32", {r},
                             w.outlier_scales));
        narrow.push_back(Entry(QuantTensorName(i, proj, "qweight_outlier"), "I8",
                               {r, w.spec.n_outliers}, w.q_outlier));
      }
    }
  }
  for (SafetensorsEntry& e : narrow) wide.push_back(std::move(e));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError("cannot create directory " + dir + ": " + ec.message());
  if (absl::Status s = WriteSafetensors(dir + "/" + kQuantTensorsName, wide,
                                        {{"format", kQuantFormat}});
      !s.ok()) {
    return s;
  }
  return WriteStringToFile(dir + "/" + kQuantJsonName, meta.ToJson().dump(2) + "\n");
}

}  // namespace loom::quant
