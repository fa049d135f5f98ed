// The GPU layout conversion of Atom weights / activations (runs without a GPU).
#include "kernels/cuda/atom_gpu_layout.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/atom_format.h"
#include "kernels/quant/atom_test_util.h"
#include "kernels/quant/reference_atom_kernels.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::cuda {
namespace {

using quant::QuantSpec;

QuantSpec Spec(int k, int n_outliers, int group, int w_bits, int a_bits) {
  QuantSpec s;
  s.k = k;
  s.n_outliers = n_outliers;
  s.group = group;
  s.w_bits = w_bits;
  s.a_bits = a_bits;
  return s;
}

// Value j of a GPU-layout row (4-bit: nibble j % 2 of byte j / 2, two's complement).
int GpuValue(const uint8_t* row, int j, int bits) {
  if (bits == 8) return static_cast<int8_t>(row[j]);
  const int nib = (row[j / 2] >> (4 * (j % 2))) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}

TEST(AtomGpuLayoutTest, GeometryAndSupport) {
  const absl::StatusOr<AtomGpuGeometry> g = AtomGpuGeometryFor(Spec(600, 64, 128, 4, 4));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->k_normal, 536);
  EXPECT_EQ(g->n_groups, 5);
  EXPECT_EQ(g->k_normal_padded, 640);
  EXPECT_EQ(g->n_out_pad, 64);
  EXPECT_EQ(g->weight_row_bytes(), 320);
  EXPECT_EQ(AtomGpuGeometryFor(Spec(576, 40, 128, 4, 8))->n_out_pad, 64);
  EXPECT_EQ(AtomGpuGeometryFor(Spec(576, 40, 128, 8, 8))->act_row_bytes(), 640);
  EXPECT_EQ(AtomGpuGeometryFor(Spec(576, 64, 32, 4, 4)).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(AtomGpuGeometryFor(Spec(576, 64, 128, 8, 4)).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(AtomGpuGeometryFor(Spec(16384, 0, 128, 4, 4)).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(AtomGpuGeometryFor(Spec(0, 0, 128, 4, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AtomGpuLayoutTest, RepackedWeightsHoldTheSameValues) {
  for (const QuantSpec& spec : {Spec(600, 64, 128, 4, 4), Spec(576, 40, 64, 4, 8),
                                Spec(1536, 0, 128, 8, 8)}) {
    SCOPED_TRACE(::testing::Message() << "k=" << spec.k << " w" << spec.w_bits);
    const int rows = 9;
    const std::vector<float> w =
        quant::testing::RandomValues(size_t(rows) * spec.k, 3, 1.0f, spec.k, 17);
    absl::StatusOr<quant::AtomWeight> aw = quant::QuantizeWeightRTN(w.data(), rows, spec);
    ASSERT_TRUE(aw.ok()) << aw.status();
    const absl::StatusOr<AtomGpuWeightsHost> g = RepackWeightsForGpu(aw->view());
    ASSERT_TRUE(g.ok()) << g.status();
    const AtomGpuGeometry& geo = g->geo;
    std::vector<int8_t> q(spec.k_normal_padded());
    for (int r = 0; r < rows; ++r) {
      quant::UnpackNormalRow(aw->q.data() + r * spec.weight_row_bytes(), spec, q.data());
      const uint8_t* row = g->q.data() + size_t(r) * geo.weight_row_bytes();
      for (int j = 0; j < spec.k_normal_padded(); ++j) {
        ASSERT_EQ(GpuValue(row, j, spec.w_bits), q[j]) << "r=" << r << " j=" << j;
      }
      for (int j = 0; j < geo.n_out_pad; ++j) {
        const int want = j < spec.n_outliers ? aw->q_outlier[r * spec.n_outliers + j] : 0;
        ASSERT_EQ(g->q_outlier[size_t(r) * geo.n_out_pad + j], want) << "r=" << r;
      }
      if (spec.n_outliers > 0) {
        EXPECT_EQ(g->outlier_scales[r], aw->outlier_scales[r]);
      }
    }
    EXPECT_EQ(g->scales, aw->scales);
  }
}

TEST(AtomGpuLayoutTest, ActivationsRoundTrip) {
  std::unique_ptr<quant::AtomKernels> ref = quant::CreateReferenceAtomKernels();
  for (const QuantSpec& spec : {Spec(600, 64, 128, 4, 4), Spec(576, 40, 64, 4, 8)}) {
    const int n = 5;
    const std::vector<float> x =
        quant::testing::RandomValues(size_t(n) * spec.k, 4, 2.0f, spec.k, 13);
    quant::AtomActivations a;
    ref->Quantize(x.data(), n, nullptr, spec, &a, nullptr);
    const absl::StatusOr<AtomGpuActivationsHost> g = PackActivationsForGpu(a);
    ASSERT_TRUE(g.ok()) << g.status();
    const absl::StatusOr<quant::AtomActivations> back = UnpackActivationsFromGpu(spec, *g);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->n, n);
    const size_t kp = spec.k_normal_padded();
    EXPECT_EQ(std::vector<int8_t>(back->q.begin(), back->q.begin() + n * kp),
              std::vector<int8_t>(a.q.begin(), a.q.begin() + n * kp));
    EXPECT_EQ(std::vector<float>(back->scales.begin(), back->scales.begin() + n * spec.n_groups()),
              std::vector<float>(a.scales.begin(), a.scales.begin() + n * spec.n_groups()));
    EXPECT_EQ(std::vector<int8_t>(back->q_outlier.begin(),
                                  back->q_outlier.begin() + n * spec.n_outliers),
              std::vector<int8_t>(a.q_outlier.begin(), a.q_outlier.begin() + n * spec.n_outliers));
    EXPECT_EQ(std::vector<float>(back->outlier_scales.begin(), back->outlier_scales.begin() + n),
              std::vector<float>(a.outlier_scales.begin(), a.outlier_scales.begin() + n));
  }
}

}  // namespace
}  // namespace loom::kernels::cuda
