#include "kernels/cuda/atom_gpu_layout.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::cuda {
namespace {

// Packs int8 values q[0..count) (each in [-8, 7]) two per byte, low nibble first.
void PackNibbles(const int8_t* q, int count, uint8_t* out) {
  for (int j = 0; j < count; j += 2) {
    out[j / 2] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 1] & 0xF) << 4));
  }
}

int SignedNibble(uint8_t v) { return static_cast<int>(v & 0xF) - ((v & 0x8) ? 16 : 0); }

}  // namespace

absl::StatusOr<AtomGpuGeometry> AtomGpuGeometryFor(const quant::QuantSpec& spec) {
  if (absl::Status st = spec.Validate(); !st.ok()) return st;
  const bool supported = (spec.w_bits == 4 && (spec.a_bits == 4 || spec.a_bits == 8)) ||
                         (spec.w_bits == 8 && spec.a_bits == 8);
  if (!supported || spec.group % 64 != 0 || spec.k > kAtomGpuMaxK) {
    return absl::UnimplementedError(absl::StrCat(
        "Atom GPU kernels support w4a4 / w4a8 / w8a8 with group % 64 == 0 and k <= ",
        kAtomGpuMaxK, "; got w", spec.w_bits, "a", spec.a_bits, " group ", spec.group,
        " k ", spec.k));
  }
  AtomGpuGeometry g;
  g.k = spec.k;
  g.k_normal = spec.k_normal();
  g.k_normal_padded = spec.k_normal_padded();
  g.n_groups = spec.n_groups();
  g.group = spec.group;
  g.n_outliers = spec.n_outliers;
  g.n_out_pad = (spec.n_outliers + 31) / 32 * 32;
  g.w_bits = spec.w_bits;
  g.a_bits = spec.a_bits;
  return g;
}

absl::StatusOr<AtomGpuWeightsHost> RepackWeightsForGpu(const quant::AtomWeightView& w) {
  absl::StatusOr<AtomGpuGeometry> geo = AtomGpuGeometryFor(w.spec);
  if (!geo.ok()) return geo.status();
  if (w.rows < 1 || w.rows >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("RepackWeightsForGpu: rows ", w.rows));
  }
  if (w.q == nullptr || w.scales == nullptr ||
      (w.spec.n_outliers > 0 && (w.q_outlier == nullptr || w.outlier_scales == nullptr))) {
    return absl::InvalidArgumentError("RepackWeightsForGpu: null array");
  }
  const AtomGpuGeometry& g = *geo;
  AtomGpuWeightsHost out;
  out.geo = g;
  out.rows = static_cast<int>(w.rows);
  const size_t rows = static_cast<size_t>(w.rows);
  out.q.resize(rows * g.weight_row_bytes());
  out.scales.assign(w.scales, w.scales + rows * g.n_groups);
  out.q_outlier.assign(rows * g.n_out_pad, 0);
  out.outlier_scales.assign(rows, 0.0f);
  std::vector<int8_t> unpacked(g.k_normal_padded);
  const size_t src_row_bytes = w.spec.weight_row_bytes();
  for (size_t r = 0; r < rows; ++r) {
    quant::UnpackNormalRow(w.q + r * src_row_bytes, w.spec, unpacked.data());
    uint8_t* dst = out.q.data() + r * g.weight_row_bytes();
    if (g.w_bits == 4) {
      PackNibbles(unpacked.data(), g.k_normal_padded, dst);
    } else {
      std::memcpy(dst, unpacked.data(), g.k_normal_padded);
    }
    if (g.n_outliers > 0) {
      std::memcpy(out.q_outlier.data() + r * g.n_out_pad, w.q_outlier + r * g.n_outliers,
                  g.n_outliers);
      out.outlier_scales[r] = w.outlier_scales[r];
    }
  }
  return out;
}

absl::StatusOr<AtomGpuActivationsHost> PackActivationsForGpu(const quant::AtomActivations& x) {
  absl::StatusOr<AtomGpuGeometry> geo = AtomGpuGeometryFor(x.spec);
  if (!geo.ok()) return geo.status();
  const AtomGpuGeometry& g = *geo;
  const size_t n = static_cast<size_t>(x.n);
  if (x.n < 0 || x.q.size() < n * g.k_normal_padded || x.scales.size() < n * g.n_groups ||
      x.q_outlier.size() < n * g.n_outliers ||
      (g.n_outliers > 0 && x.outlier_scales.size() < n)) {
    return absl::InvalidArgumentError("PackActivationsForGpu: buffers smaller than n rows");
  }
  AtomGpuActivationsHost out;
  out.geo = g;
  out.n = x.n;
  out.q.resize(n * g.act_row_bytes());
  out.scales.assign(x.scales.begin(), x.scales.begin() + n * g.n_groups);
  out.q_outlier.assign(n * g.n_out_pad, 0);
  out.outlier_scales.assign(n, 0.0f);
  for (size_t t = 0; t < n; ++t) {
    const int8_t* src = x.q.data() + t * g.k_normal_padded;
    uint8_t* dst = out.q.data() + t * g.act_row_bytes();
    if (g.a_bits == 4) {
      PackNibbles(src, g.k_normal_padded, dst);
    } else {
      std::memcpy(dst, src, g.k_normal_padded);
    }
    if (g.n_outliers > 0) {
      std::memcpy(out.q_outlier.data() + t * g.n_out_pad, x.q_outlier.data() + t * g.n_outliers,
                  g.n_outliers);
      out.outlier_scales[t] = x.outlier_scales[t];
    }
  }
  return out;
}

absl::StatusOr<quant::AtomActivations> UnpackActivationsFromGpu(
    const quant::QuantSpec& spec, const AtomGpuActivationsHost& x) {
  absl::StatusOr<AtomGpuGeometry> geo = AtomGpuGeometryFor(spec);
  if (!geo.ok()) return geo.status();
  const AtomGpuGeometry& g = *geo;
  const size_t n = static_cast<size_t>(x.n);
  if (x.n < 0 || x.q.size() < n * g.act_row_bytes() || x.scales.size() < n * g.n_groups ||
      x.q_outlier.size() < n * g.n_out_pad || x.outlier_scales.size() < n) {
    return absl::InvalidArgumentError("UnpackActivationsFromGpu: buffers smaller than n rows");
  }
  quant::AtomActivations out;
  out.Resize(spec, x.n);
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* src = x.q.data() + t * g.act_row_bytes();
    int8_t* dst = out.q.data() + t * g.k_normal_padded;
    for (int j = 0; j < g.k_normal_padded; ++j) {
      dst[j] = g.a_bits == 4 ? static_cast<int8_t>(SignedNibble(src[j / 2] >> (4 * (j % 2))))
                             : static_cast<int8_t>(src[j]);
    }
    std::copy(x.scales.begin() + t * g.n_groups, x.scales.begin() + (t + 1) * g.n_groups,
              out.scales.begin() + t * g.n_groups);
    if (g.n_outliers > 0) {
      std::memcpy(out.q_outlier.data() + t * g.n_outliers, x.q_outlier.data() + t * g.n_out_pad,
                  g.n_outliers);
      out.outlier_scales[t] = x.outlier_scales[t];
    }
  }
  return out;
}

}  // namespace loom::kernels::cuda
