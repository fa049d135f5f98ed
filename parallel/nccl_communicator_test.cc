// NcclCommunicator on real GPUs. Without a GPU every test skips with one line. One GPU runs
// the single-rank group (NCCL refuses two ranks on one device) and the rank-order sum
// kernel against the host's rank-order sum; two or more GPUs run W-rank groups against the
// same serial references as ThreadCommunicator's tests.
#include "parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "kernels/cuda/gpu_test_util.h"
#include "parallel/rank_order_sum_launch.h"

namespace loom {
namespace {

using kernels::cuda::gpu_testing::DeviceFloats;

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::vector<float> RandomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng) * std::pow(10.0f, static_cast<int>(rng() % 7) - 3);
  return v;
}

bool Bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// The kernel behind the deterministic AllReduceSum: ((g0 + g1) + g2) exactly, including
// the case 1e8 + 1 - 1e8 = 0 that any other order gets wrong.
TEST(RankOrderSumTest, MatchesHostRankOrderSumBitwise) {
  LOOM_SKIP_WITHOUT_GPU();
  constexpr int kW = 3;
  constexpr size_t kN = 100003;
  std::vector<float> g;
  for (int r = 0; r < kW; ++r) {
    std::vector<float> v = RandomVec(kN, r + 1);
    v[0] = r == 0 ? 1e8f : (r == 1 ? 1.0f : -1e8f);
    g.insert(g.end(), v.begin(), v.end());
  }
  std::vector<float> want(kN);
  for (size_t i = 0; i < kN; ++i) want[i] = (g[i] + g[kN + i]) + g[2 * kN + i];
  ASSERT_EQ(want[0], 0.0f);
  DeviceFloats dg(g.size()), dout(kN);
  ASSERT_TRUE(dg.ok() && dout.ok());
  dg.CopyFrom(g);
  ASSERT_EQ(parallel_cuda::LaunchRankOrderSum(dg.get(), kW, kN, dout.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got;
  dout.CopyTo(&got, kN);
  EXPECT_TRUE(Bitwise(got, want));
}

TEST(NcclCommunicatorTest, SingleRankCollectivesAreIdentity) {
  LOOM_SKIP_WITHOUT_GPU();
  auto comms = NcclCommunicator::CreateAll({0});
  ASSERT_TRUE(comms.ok()) << comms.status();
  Communicator& c = *(*comms)[0];
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_size(), 1);
  const std::vector<float> x = RandomVec(4099, 7);
  DeviceFloats buf(x.size()), out(x.size());
  ASSERT_TRUE(buf.ok() && out.ok());
  buf.CopyFrom(x);
  std::vector<float> got;
  ASSERT_TRUE(c.AllReduceSum(buf.get(), x.size()).ok());
  buf.CopyTo(&got, x.size());
  EXPECT_TRUE(Bitwise(got, x));
  ASSERT_TRUE(c.AllGather(buf.get(), x.size(), out.get()).ok());
  out.CopyTo(&got, x.size());
  EXPECT_TRUE(Bitwise(got, x));
  ASSERT_TRUE(c.Broadcast(buf.get(), x.size(), 0).ok());
  EXPECT_EQ(c.Broadcast(buf.get(), x.size(), 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.Barrier().ok());
}

TEST(NcclCommunicatorTest, MultiGpuAllReduceIsRankOrderAndGatherBroadcastMatch) {
  LOOM_SKIP_WITHOUT_GPU();
  const int w = DeviceCount();
  if (w < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL refuses two ranks on one device)";
  std::vector<int> devices(w);
  for (int r = 0; r < w; ++r) devices[r] = r;
  auto comms = NcclCommunicator::CreateAll(devices);
  ASSERT_TRUE(comms.ok()) << comms.status();
  constexpr size_t kN = 5000;
  std::vector<std::vector<float>> in(w);
  for (int r = 0; r < w; ++r) in[r] = RandomVec(kN, 50 + r);
  std::vector<float> sum = in[0], gathered;
  for (int r = 1; r < w; ++r) {
    for (size_t i = 0; i < kN; ++i) sum[i] += in[r][i];
  }
  for (int r = 0; r < w; ++r) gathered.insert(gathered.end(), in[r].begin(), in[r].end());
  std::vector<int> failures(w, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      Communicator& c = *(*comms)[r];
      DeviceFloats buf(kN), out(kN * w);
      std::vector<float> got;
      buf.CopyFrom(in[r]);
      if (!c.AllReduceSum(buf.get(), kN).ok()) ++failures[r];
      buf.CopyTo(&got, kN);
      if (!Bitwise(got, sum)) ++failures[r];
      buf.CopyFrom(in[r]);
      if (!c.AllGather(buf.get(), kN, out.get()).ok()) ++failures[r];
      out.CopyTo(&got, kN * w);
      if (!Bitwise(got, gathered)) ++failures[r];
      if (!c.Broadcast(buf.get(), kN, w - 1).ok()) ++failures[r];
      buf.CopyTo(&got, kN);
      if (!Bitwise(got, in[w - 1])) ++failures[r];
      if (!c.Barrier().ok()) ++failures[r];
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < w; ++r) EXPECT_EQ(failures[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace loom
