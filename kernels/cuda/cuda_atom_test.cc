// The CUDA Atom kernels vs kernels/quant's ReferenceAtomKernels: quantization and the
// integer-MMA GEMM bitwise, the fused RMSNorm / SiLU*mul quantizers within one
// quantization step. GPU tests skip without a device.
#include "kernels/cuda/cuda_atom.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/quant/atom_format.h"
#include "kernels/quant/atom_test_util.h"
#include "kernels/quant/reference_atom_kernels.h"
#include "kernels/quant/weight_packing.h"

namespace loom::kernels::cuda {
namespace {

using quant::AtomActivations;
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

const std::vector<QuantSpec>& Specs() {
  static const std::vector<QuantSpec> specs = {
      Spec(576, 64, 128, 4, 4),   // SmolLM2 hidden, Atom's outlier count
      Spec(600, 64, 128, 4, 4),   // partial last group
      Spec(4096, 128, 128, 4, 4), // Llama-7B hidden
      Spec(1536, 0, 64, 4, 4),    // no outliers, group 64
      Spec(576, 40, 128, 4, 8),   // W4A8 (the Hopper path), outliers padded 40 -> 64
      Spec(1536, 0, 128, 8, 8),   // W8A8
  };
  return specs;
}

std::string Name(const QuantSpec& s) {
  return ::testing::PrintToString(s.k) + "/" + std::to_string(s.n_outliers) + " g" +
         std::to_string(s.group) + " w" + std::to_string(s.w_bits) + "a" +
         std::to_string(s.a_bits);
}

// Rows [0, n) of a's buffers (they may be larger).
template <typename T>
std::vector<T> Head(const std::vector<T>& v, size_t count) {
  return std::vector<T>(v.begin(), v.begin() + count);
}

TEST(CudaAtomTest, UnsupportedSpecIsUnimplementedEverywhere) {
  EXPECT_EQ(CudaAtomActivations::Create(Spec(576, 64, 32, 4, 4), 4).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(CudaAtomTest, CreateMatchesDevicePresence) {
  const absl::StatusOr<CudaAtomActivations> a =
      CudaAtomActivations::Create(Spec(576, 64, 128, 4, 4), 4);
  if (gpu_testing::GpuPresent()) {
    EXPECT_TRUE(a.ok()) << a.status();
  } else {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable) << a.status();
  }
}

TEST(CudaAtomTest, QuantizeMatchesReferenceBitwise) {
  LOOM_SKIP_WITHOUT_GPU();
  std::unique_ptr<quant::AtomKernels> ref = quant::CreateReferenceAtomKernels();
  for (const QuantSpec& spec : Specs()) {
    for (int n : {1, 7, 33}) {
      SCOPED_TRACE(Name(spec) + " n=" + std::to_string(n));
      const std::vector<float> x =
          quant::testing::RandomValues(size_t(n) * spec.k, n + spec.k, 2.0f, spec.k, 23);
      const std::vector<int32_t> perm = quant::testing::RandomPerm(spec.k, 7);
      AtomActivations want;
      std::vector<float> want_perm(x.size());
      ref->Quantize(x.data(), n, perm.data(), spec, &want, want_perm.data());

      auto dx = DeviceBuffer<float>::FromHost(x);
      auto dperm = DeviceBuffer<int32_t>::FromHost(perm);
      auto dpermuted = DeviceBuffer<float>::Allocate(x.size());
      auto acts = CudaAtomActivations::Create(spec, n);
      ASSERT_TRUE(dx.ok() && dperm.ok() && dpermuted.ok() && acts.ok());
      ASSERT_TRUE(AtomQuantize(dx->get(), n, dperm->get(), &*acts, dpermuted->get()).ok());
      const absl::StatusOr<AtomActivations> got = acts->ToHost();
      ASSERT_TRUE(got.ok()) << got.status();
      const size_t kp = spec.k_normal_padded(), ng = spec.n_groups(), no = spec.n_outliers;
      EXPECT_EQ(Head(got->q, n * kp), Head(want.q, n * kp));
      EXPECT_EQ(Head(got->scales, n * ng), Head(want.scales, n * ng));
      EXPECT_EQ(Head(got->q_outlier, n * no), Head(want.q_outlier, n * no));
      if (no > 0) {
        EXPECT_EQ(Head(got->outlier_scales, n), Head(want.outlier_scales, n));
      }
      EXPECT_EQ(*dpermuted->ToHost(), want_perm);
    }
  }
}

TEST(CudaAtomTest, MatMulMatchesReferenceBitwise) {
  LOOM_SKIP_WITHOUT_GPU();
  std::unique_ptr<quant::AtomKernels> ref = quant::CreateReferenceAtomKernels();
  for (const QuantSpec& spec : Specs()) {
    for (int rows : {200, 576}) {
      const std::vector<float> w =
          quant::testing::RandomValues(size_t(rows) * spec.k, rows, 0.5f, spec.k, 29);
      absl::StatusOr<quant::AtomWeight> aw = quant::QuantizeWeightRTN(w.data(), rows, spec, 0.9f);
      ASSERT_TRUE(aw.ok()) << aw.status();
      absl::StatusOr<CudaAtomWeight> dw = CudaAtomWeight::Upload(aw->view());
      ASSERT_TRUE(dw.ok()) << dw.status();
      for (int n : {1, 7, 33, 64}) {
        SCOPED_TRACE(Name(spec) + " rows=" + std::to_string(rows) + " n=" + std::to_string(n));
        const std::vector<float> x =
            quant::testing::RandomValues(size_t(n) * spec.k, 3 * n + 1, 2.0f, spec.k, 23);
        AtomActivations xq;
        ref->Quantize(x.data(), n, nullptr, spec, &xq, nullptr);
        std::vector<float> want(size_t(n) * rows);
        ref->MatMul(aw->view(), xq, want.data());
        absl::StatusOr<CudaAtomActivations> dx = CudaAtomActivations::FromHost(xq);
        auto dy = DeviceBuffer<float>::Allocate(want.size());
        ASSERT_TRUE(dx.ok() && dy.ok()) << dx.status();
        ASSERT_TRUE(AtomMatMul(*dw, *dx, dy->get()).ok());
        const std::vector<float> got = *dy->ToHost();
        int bad = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          if (got[i] != want[i] && ++bad <= 3) {
            ADD_FAILURE() << "y[" << i / rows << "," << i % rows << "] got " << got[i]
                          << " want " << want[i];
          }
        }
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

// Fused prologues: h is computed in FP32 (RMSNorm) / double on the device (SiLU), so a
// value on a rounding boundary may quantize one step away from the reference's.
void ExpectWithinOneStep(const AtomActivations& got, const AtomActivations& want, int n) {
  const QuantSpec& s = want.spec;
  const size_t kp = s.k_normal_padded();
  int off = 0;
  for (size_t i = 0; i < n * kp; ++i) {
    const int d = std::abs(got.q[i] - want.q[i]);
    ASSERT_LE(d, 1) << "q[" << i << "]";
    off += d;
  }
  EXPECT_LE(off, static_cast<int>(n * kp / 100)) << "more than 1% of values moved";
  for (size_t i = 0; i < n * s.n_groups(); ++i) {
    EXPECT_NEAR(got.scales[i], want.scales[i], 1e-5f * want.scales[i]) << "scale " << i;
  }
}

TEST(CudaAtomTest, FusedRmsNormAndSiluMulQuantizeAgreeWithReference) {
  LOOM_SKIP_WITHOUT_GPU();
  std::unique_ptr<quant::AtomKernels> ref = quant::CreateReferenceAtomKernels();
  for (const QuantSpec& spec : {Specs()[0], Specs()[2], Specs()[4]}) {
    SCOPED_TRACE(Name(spec));
    const int n = 9;
    const std::vector<float> x =
        quant::testing::RandomValues(size_t(n) * spec.k, 41, 3.0f, spec.k, 19);
    const std::vector<float> up = quant::testing::RandomValues(x.size(), 43, 1.0f);
    const std::vector<float> gamma = quant::testing::RandomValues(spec.k, 42, 1.5f);
    const std::vector<int32_t> perm = quant::testing::RandomPerm(spec.k, 8);
    auto dx = DeviceBuffer<float>::FromHost(x);
    auto dup = DeviceBuffer<float>::FromHost(up);
    auto dg = DeviceBuffer<float>::FromHost(gamma);
    auto dperm = DeviceBuffer<int32_t>::FromHost(perm);
    auto acts = CudaAtomActivations::Create(spec, n);
    ASSERT_TRUE(dx.ok() && dup.ok() && dg.ok() && dperm.ok() && acts.ok());

    AtomActivations want;
    ref->RmsNormQuantize(x.data(), gamma.data(), n, 1e-5f, perm.data(), spec, &want, nullptr);
    ASSERT_TRUE(
        AtomRmsNormQuantize(dx->get(), dg->get(), n, 1e-5f, dperm->get(), &*acts, nullptr).ok());
    absl::StatusOr<AtomActivations> got = acts->ToHost();
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectWithinOneStep(*got, want, n);

    ref->SiluMulQuantize(x.data(), up.data(), n, spec, &want, nullptr);
    ASSERT_TRUE(AtomSiluMulQuantize(dx->get(), dup->get(), n, &*acts, nullptr).ok());
    got = acts->ToHost();
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectWithinOneStep(*got, want, n);
  }
}

// The online-rotation quantizers (QuaRot) against the CPU reference: HadamardQuantize
// bitwise (quantized rows, scales, outliers and the rotated rows), SiluMulHadamardQuantize
// within one quantization step (its SiLU runs the device's double exp), over SmolLM2's
// widths 576 = 36 x 16 and 1536 = 12 x 128, a power of two, with and without signs.
TEST(CudaAtomTest, HadamardQuantizeMatchesReference) {
  LOOM_SKIP_WITHOUT_GPU();
  std::unique_ptr<quant::AtomKernels> ref = quant::CreateReferenceAtomKernels();
  // The rotation covers the normal channels (k - outliers), blocked where that width has
  // no Hadamard matrix (1536 - 64 = 1472 = 23 x 64).
  for (const QuantSpec& spec : {Spec(576, 0, 64, 4, 4), Spec(576, 64, 64, 4, 4),
                                Spec(1536, 64, 64, 4, 4), Spec(1536, 0, 128, 4, 8),
                                Spec(512, 0, 64, 8, 8)}) {
    for (bool with_signs : {false, true}) {
      const int m = spec.k_normal();
      const HadamardTransform t = *HadamardTransform::CreateFullOrBlocked(
          m, with_signs ? HadamardTransform::RandomSigns(m, 3) : std::vector<float>());
      absl::StatusOr<CudaHadamard> dt = CudaHadamard::Upload(t);
      ASSERT_TRUE(dt.ok()) << dt.status();
      for (int n : {1, 7, 33}) {
        SCOPED_TRACE(Name(spec) + " n=" + std::to_string(n) + (with_signs ? " signs" : ""));
        const std::vector<float> x =
            quant::testing::RandomValues(size_t(n) * spec.k, n + spec.k, 2.0f, spec.k, 23);
        const std::vector<float> up = quant::testing::RandomValues(x.size(), 5, 1.0f);
        const std::vector<int32_t> perm = quant::testing::RandomPerm(spec.k, 7);
        auto dx = DeviceBuffer<float>::FromHost(x);
        auto dup = DeviceBuffer<float>::FromHost(up);
        auto dperm = DeviceBuffer<int32_t>::FromHost(perm);
        auto drot = DeviceBuffer<float>::Allocate(x.size());
        auto acts = CudaAtomActivations::Create(spec, n);
        ASSERT_TRUE(dx.ok() && dup.ok() && dperm.ok() && drot.ok() && acts.ok());

        AtomActivations want;
        std::vector<float> want_rot(x.size());
        ref->HadamardQuantize(x.data(), n, t, perm.data(), spec, &want, want_rot.data());
        ASSERT_TRUE(
            AtomHadamardQuantize(dx->get(), n, *dt, dperm->get(), &*acts, drot->get()).ok());
        absl::StatusOr<AtomActivations> got = acts->ToHost();
        ASSERT_TRUE(got.ok()) << got.status();
        const size_t kp = spec.k_normal_padded(), ng = spec.n_groups(), no = spec.n_outliers;
        EXPECT_EQ(Head(got->q, n * kp), Head(want.q, n * kp));
        EXPECT_EQ(Head(got->scales, n * ng), Head(want.scales, n * ng));
        EXPECT_EQ(Head(got->q_outlier, n * no), Head(want.q_outlier, n * no));
        EXPECT_EQ(*drot->ToHost(), want_rot);

        ref->SiluMulHadamardQuantize(x.data(), up.data(), n, t, perm.data(), spec, &want,
                                     want_rot.data());
        ASSERT_TRUE(AtomSiluMulHadamardQuantize(dx->get(), dup->get(), n, *dt, dperm->get(),
                                                &*acts, drot->get())
                        .ok());
        got = acts->ToHost();
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectWithinOneStep(*got, want, n);
        const std::vector<float> rot = *drot->ToHost();
        for (size_t i = 0; i < rot.size(); ++i) {
          ASSERT_NEAR(rot[i], want_rot[i], 1e-5f * (1.0f + std::fabs(want_rot[i]))) << i;
        }
      }
    }
  }
  // A rotation of the wrong width is refused.
  auto acts = CudaAtomActivations::Create(Spec(576, 0, 64, 4, 4), 1);
  auto dt = CudaHadamard::Upload(*HadamardTransform::Create(1024));
  ASSERT_TRUE(acts.ok() && dt.ok());
  float dummy = 0.0f;
  EXPECT_EQ(AtomHadamardQuantize(&dummy, 1, *dt, nullptr, &*acts, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaAtomTest, HadamardUploadMatchesDevicePresence) {
  const absl::StatusOr<CudaHadamard> t = CudaHadamard::Upload(*HadamardTransform::Create(576));
  if (gpu_testing::GpuPresent()) {
    EXPECT_TRUE(t.ok()) << t.status();
  } else {
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable) << t.status();
  }
}

TEST(CudaAtomTest, MismatchedSpecsAndBadRowsAreErrors) {
  LOOM_SKIP_WITHOUT_GPU();
  const QuantSpec a = Specs()[0], b = Specs()[4];
  const std::vector<float> w(size_t(8) * a.k, 0.5f);
  absl::StatusOr<quant::AtomWeight> aw = quant::QuantizeWeightRTN(w.data(), 8, a);
  ASSERT_TRUE(aw.ok());
  absl::StatusOr<CudaAtomWeight> dw = CudaAtomWeight::Upload(aw->view());
  absl::StatusOr<CudaAtomActivations> acts = CudaAtomActivations::Create(b, 4);
  ASSERT_TRUE(dw.ok() && acts.ok());
  float dummy = 0.0f;  // never dereferenced: validation fails first
  ASSERT_TRUE(AtomQuantize(&dummy, 0, nullptr, &*acts, nullptr).ok());  // n = 0: no-op
  EXPECT_EQ(AtomQuantize(&dummy, 5, nullptr, &*acts, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AtomMatMul(*dw, *acts, &dummy).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom::kernels::cuda
