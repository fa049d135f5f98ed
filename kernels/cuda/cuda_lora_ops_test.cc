// CudaLoraOps vs the scalar ReferenceLoraOps over a shape grid (mixed ranks 8/16/64,
// empty and adapter-less segments, h 576 / 1536 / 4096), BGMV vs SGMV bitwise, and the
// error paths. GPU tests skip without a device.
#include "kernels/cuda/cuda_lora_ops.h"

#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sgmv/reference_lora_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/dtype.h"
#include "kernels/lora_ops.h"

namespace loom::kernels::cuda {
namespace {

// One adapter: host BF16 weights, their device copies, and host pairs pointing at each
// (host_pair for the reference, dev_pair.a/b device pointers for the GPU).
struct Adapter {
  std::vector<uint16_t> a, b;          // [rank, h_in], [h_out, rank]
  std::vector<uint16_t> abs_a, abs_b;  // |a|, |b|: the error bound's reference
  DeviceBuffer<uint16_t> da, db;
  LoraPair host_pair, abs_pair, dev_pair;
};

uint16_t AbsBf16(uint16_t h) { return h & 0x7FFF; }

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

Adapter* AddAdapter(std::deque<Adapter>* pool, int h_in, int h_out, int rank, float scale,
                    uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Adapter& ad = pool->emplace_back();
  for (int i = 0; i < rank * h_in; ++i) ad.a.push_back(Fp32ToBf16(u(rng)));
  for (int i = 0; i < h_out * rank; ++i) ad.b.push_back(Fp32ToBf16(u(rng)));
  for (uint16_t h : ad.a) ad.abs_a.push_back(AbsBf16(h));
  for (uint16_t h : ad.b) ad.abs_b.push_back(AbsBf16(h));
  ad.da = *DeviceBuffer<uint16_t>::FromHost(ad.a);
  ad.db = *DeviceBuffer<uint16_t>::FromHost(ad.b);
  ad.host_pair = LoraPair{ad.a.data(), ad.b.data(), rank, scale};
  ad.abs_pair = LoraPair{ad.abs_a.data(), ad.abs_b.data(), rank, std::fabs(scale)};
  ad.dev_pair = LoraPair{ad.da.get(), ad.db.get(), rank, scale};
  return &ad;
}

std::vector<float> Abs(std::vector<float> v) {
  for (float& f : v) f = std::fabs(f);
  return v;
}

// got vs want within 2e-6 of the sum of |terms| (bound[i], from the reference run on
// absolute values) plus 1e-6: float vs double accumulation of up to 4096 terms.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::vector<float>& bound, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float tol = 2e-6f * bound[i] + 1e-6f;
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      if (++bad <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i]
                      << " tol " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

struct Case {
  int h_in, h_out, v_stride;
  std::vector<int> lengths;  // segment token counts (0 = empty segment)
  std::vector<int> adapter;  // index into the ranks below, -1 = no adapter
};

constexpr int kRanks[] = {8, 16, 64};

std::unique_ptr<CudaLoraOps> MakeOps(int max_tokens = 256) {
  CudaLoraOpsOptions opts;
  opts.max_tokens = max_tokens;
  opts.max_h_in = 4096;
  opts.max_v_stride = 128;
  absl::StatusOr<std::unique_ptr<CudaLoraOps>> ops = CudaLoraOps::Create(opts);
  EXPECT_TRUE(ops.ok()) << ops.status();
  return ops.ok() ? std::move(*ops) : nullptr;
}

TEST(CudaLoraOpsTest, RejectsBadOptionsBeforeTouchingTheDevice) {
  CudaLoraOpsOptions opts;
  opts.max_tokens = 0;
  EXPECT_EQ(CudaLoraOps::Create(opts).status().code(), absl::StatusCode::kInvalidArgument);
  opts = CudaLoraOpsOptions();
  opts.max_v_stride = 4096;
  EXPECT_EQ(CudaLoraOps::Create(opts).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaLoraOpsTest, CreateMatchesDevicePresence) {
  const absl::StatusOr<std::unique_ptr<CudaLoraOps>> ops =
      CudaLoraOps::Create(CudaLoraOpsOptions());
  if (gpu_testing::GpuPresent()) {
    EXPECT_TRUE(ops.ok()) << ops.status();
  } else {
    EXPECT_EQ(ops.status().code(), absl::StatusCode::kUnavailable) << ops.status();
  }
}

TEST(CudaLoraOpsTest, SgmvMatchesReferenceOverShapes) {
  LOOM_SKIP_WITHOUT_GPU();
  const std::vector<Case> cases = {
      {576, 576, 64, {1, 0, 3, 1, 2, 0, 1}, {0, 1, 2, -1, 1, 0, 2}},
      {576, 1536, 72, {5, 2, 9}, {2, 0, 1}},
      {1536, 576, 64, {1, 1, 1, 1, 1, 1, 1, 1}, {0, 1, 2, 0, 1, 2, -1, 1}},
      {4096, 4096, 64, {1, 4, 0, 17, 2}, {1, 2, 0, 0, 1}},
      {4096, 4096, 16, {64}, {1}},
      {100, 37, 64, {3, 1}, {0, 2}},  // odd sizes: scalar paths
  };
  std::unique_ptr<LoraOps> ref = CreateReferenceLoraOps();
  std::unique_ptr<CudaLoraOps> ops = MakeOps();
  ASSERT_NE(ops, nullptr);
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "h_in=" << c.h_in << " h_out=" << c.h_out);
    std::deque<Adapter> pool;
    std::vector<Adapter*> ads;
    for (int r : kRanks) {
      ads.push_back(r <= c.v_stride ? AddAdapter(&pool, c.h_in, c.h_out, r, 0.5f, ++seed)
                                    : nullptr);
    }
    std::vector<LoraSegment> host_segs, abs_segs, dev_segs;
    int t = 0;
    for (size_t i = 0; i < c.lengths.size(); ++i) {
      Adapter* ad = c.adapter[i] >= 0 ? ads[c.adapter[i]] : nullptr;
      host_segs.push_back({t, t + c.lengths[i], ad ? &ad->host_pair : nullptr});
      abs_segs.push_back({t, t + c.lengths[i], ad ? &ad->abs_pair : nullptr});
      dev_segs.push_back({t, t + c.lengths[i], ad ? &ad->dev_pair : nullptr});
      t += c.lengths[i];
    }
    const int n_tokens = t;
    const int n_segs = static_cast<int>(host_segs.size());
    DeviceLoraTable table;
    ASSERT_TRUE(table.Upload(dev_segs.data(), n_segs).ok());

    const std::vector<float> x = RandomFloats(size_t(n_tokens) * c.h_in, ++seed);
    const std::vector<float> y0 = RandomFloats(size_t(n_tokens) * c.h_out, ++seed);
    // v starts with a sentinel so that skipped segments are checked to stay untouched.
    const std::vector<float> v0(size_t(n_tokens) * c.v_stride, 7.0f);

    std::vector<float> v_want = v0, v_bound = v0;
    ref->SgmvShrink(x.data(), c.h_in, host_segs.data(), n_segs, v_want.data(), c.v_stride);
    const std::vector<float> abs_x = Abs(x);
    ref->SgmvShrink(abs_x.data(), c.h_in, abs_segs.data(), n_segs, v_bound.data(),
                    c.v_stride);

    auto dx = DeviceBuffer<float>::FromHost(x);
    auto dv = DeviceBuffer<float>::FromHost(v0);
    auto dy = DeviceBuffer<float>::FromHost(y0);
    ASSERT_TRUE(dx.ok() && dv.ok() && dy.ok());
    ops->SgmvShrink(dx->get(), c.h_in, table.segs(), n_segs, dv->get(), c.v_stride);
    ASSERT_TRUE(ops->status().ok()) << ops->status();
    const std::vector<float> v_got = *dv->ToHost();
    ExpectClose(v_got, v_want, v_bound, "shrink v");

    // Expand from the GPU's v (so only the expand's rounding is compared).
    std::vector<float> y_want = y0, y_bound(y0.size(), 0.0f);
    ref->SgmvExpand(v_got.data(), c.v_stride, host_segs.data(), n_segs, c.h_out,
                    y_want.data());
    const std::vector<float> abs_v = Abs(v_got);
    ref->SgmvExpand(abs_v.data(), c.v_stride, abs_segs.data(), n_segs, c.h_out,
                    y_bound.data());
    for (size_t i = 0; i < y_bound.size(); ++i) y_bound[i] += std::fabs(y0[i]);
    ops->SgmvExpand(dv->get(), c.v_stride, table.segs(), n_segs, c.h_out, dy->get());
    ASSERT_TRUE(ops->status().ok()) << ops->status();
    ExpectClose(*dy->ToHost(), y_want, y_bound, "expand y");
  }
}

// BGMV (one adapter index per token) must equal SGMV bitwise on the device, and SGMV must
// not depend on how tokens are grouped into segments (batch invariance).
TEST(CudaLoraOpsTest, BgmvEqualsSgmvBitwiseAndSegmentationDoesNotMatter) {
  LOOM_SKIP_WITHOUT_GPU();
  const int h_in = 4096, h_out = 576, v_stride = 64, n = 12;
  std::deque<Adapter> pool;
  std::vector<LoraPair> dev_pairs;
  for (int i = 0; i < 3; ++i) {
    dev_pairs.push_back(AddAdapter(&pool, h_in, h_out, kRanks[i], 0.25f * (i + 1), 100 + i)
                            ->dev_pair);
  }
  const std::vector<int32_t> idx = {0, 0, 0, 1, -1, 2, 2, 2, 2, 1, 1, 0};
  // Segments: runs of equal idx; and the same tokens as one segment per token.
  std::vector<LoraSegment> runs, singles;
  for (int t = 0; t < n; ++t) {
    const LoraPair* p = idx[t] >= 0 ? &dev_pairs[idx[t]] : nullptr;
    singles.push_back({t, t + 1, p});
    if (!runs.empty() && runs.back().lora == p) {
      runs.back().end = t + 1;
    } else {
      runs.push_back({t, t + 1, p});
    }
  }
  const std::vector<float> x = RandomFloats(size_t(n) * h_in, 5);
  const std::vector<float> y0 = RandomFloats(size_t(n) * h_out, 6);
  std::unique_ptr<CudaLoraOps> ops = MakeOps();
  ASSERT_NE(ops, nullptr);
  auto dx = DeviceBuffer<float>::FromHost(x);
  auto didx = DeviceBuffer<int32_t>::FromHost(idx);
  ASSERT_TRUE(dx.ok() && didx.ok());

  std::vector<std::vector<float>> results;
  for (int mode = 0; mode < 3; ++mode) {
    auto dv = DeviceBuffer<float>::FromHost(std::vector<float>(size_t(n) * v_stride, 0.0f));
    auto dy = DeviceBuffer<float>::FromHost(y0);
    ASSERT_TRUE(dv.ok() && dy.ok());
    DeviceLoraTable table;
    if (mode == 2) {
      ASSERT_TRUE(table.UploadPairs(dev_pairs.data(), 3).ok());
      ops->Bgmv(dx->get(), h_in, n, didx->get(), table.pairs(), h_out, dv->get(), v_stride,
                dy->get());
    } else {
      const std::vector<LoraSegment>& segs = mode == 0 ? runs : singles;
      const int ns = static_cast<int>(segs.size());
      ASSERT_TRUE(table.Upload(segs.data(), ns).ok());
      ops->SgmvShrink(dx->get(), h_in, table.segs(), ns, dv->get(), v_stride);
      ops->SgmvExpand(dv->get(), v_stride, table.segs(), ns, h_out, dy->get());
    }
    ASSERT_TRUE(ops->status().ok()) << ops->status();
    results.push_back(*dy->ToHost());
  }
  EXPECT_EQ(results[0], results[1]) << "SGMV depends on the segmentation";
  EXPECT_EQ(results[0], results[2]) << "BGMV differs from SGMV";
  EXPECT_NE(results[0], y0) << "nothing was added";
}

TEST(CudaLoraOpsTest, SegmentPastMaxTokensIsReportedNotComputed) {
  LOOM_SKIP_WITHOUT_GPU();
  const int h_in = 1024, v_stride = 16;
  std::deque<Adapter> pool;
  Adapter* ad = AddAdapter(&pool, h_in, 8, 16, 1.0f, 9);
  std::unique_ptr<CudaLoraOps> ops = MakeOps(/*max_tokens=*/4);
  ASSERT_NE(ops, nullptr);
  const LoraSegment seg{0, 6, &ad->dev_pair};
  DeviceLoraTable table;
  ASSERT_TRUE(table.Upload(&seg, 1).ok());
  auto dx = DeviceBuffer<float>::FromHost(RandomFloats(size_t(6) * h_in, 3));
  auto dv = DeviceBuffer<float>::FromHost(std::vector<float>(6 * v_stride, 0.0f));
  ASSERT_TRUE(dx.ok() && dv.ok());
  ops->SgmvShrink(dx->get(), h_in, table.segs(), 1, dv->get(), v_stride);
  EXPECT_EQ(ops->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*dv->ToHost(), std::vector<float>(6 * v_stride, 0.0f));
}

TEST(CudaLoraOpsTest, BadShapesAreStickyErrors) {
  LOOM_SKIP_WITHOUT_GPU();
  std::unique_ptr<CudaLoraOps> ops = MakeOps();
  ASSERT_NE(ops, nullptr);
  float dummy = 0.0f;  // never dereferenced: validation fails first
  ops->SgmvShrink(&dummy, 8192, reinterpret_cast<const LoraSegment*>(&dummy), 1, &dummy, 16);
  EXPECT_EQ(ops->status().code(), absl::StatusCode::kInvalidArgument);
  ops->SgmvShrink(nullptr, 64, nullptr, 1, nullptr, 16);  // still the first error
  EXPECT_NE(ops->status().message().find("8192"), std::string::npos) << ops->status();
}

}  // namespace
}  // namespace loom::kernels::cuda
