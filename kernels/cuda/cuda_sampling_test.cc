// The device sampler vs a scalar host implementation of the same documented semantics
// (double arithmetic, explicit sorts). Rows whose draw lands within 1e-4 (relative) of a
// cumulative boundary are not compared (FP32 sums on the device may round either way);
// every greedy row must match exactly. GPU tests skip without a device.
#include "kernels/cuda/cuda_sampling.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gpu_test_util.h"

namespace loom::kernels::cuda {
namespace {

struct Expected {
  int id = 0;
  bool ambiguous = false;
};

// The semantics of sampling.cu / models/sampling/sampler.h (no penalties), in double.
Expected Reference(const float* row, int vocab, const RowSampling& p) {
  std::vector<double> l(vocab);
  for (int i = 0; i < vocab; ++i) {
    float x = row[i];
    if (std::isnan(x)) x = -INFINITY;
    if (std::isinf(x) && x > 0) x = FLT_MAX;
    l[i] = x;
  }
  const int best = static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
  if (p.temperature == 0.0f) return {best, false};
  std::vector<int> cand(vocab);
  for (int i = 0; i < vocab; ++i) cand[i] = i;
  const bool use_k = p.top_k > 0 && p.top_k < vocab, use_p = p.top_p < 1.0f;
  if (use_k) {
    std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) { return l[a] > l[b]; });
    cand.resize(p.top_k);
  }
  std::vector<double> pr(vocab, 0.0);
  for (int i : cand) pr[i] = l[i] == -INFINITY ? 0.0 : std::exp((l[i] - l[best]) / p.temperature);
  Expected e;
  if (use_k || use_p) {
    std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) {
      return pr[a] != pr[b] ? pr[a] > pr[b] : a < b;
    });
  } else {
    std::sort(cand.begin(), cand.end());
  }
  double total = 0.0;
  for (int i : cand) total += pr[i];
  if (use_p) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < cand.size() && cum < p.top_p * total) {
      cum += pr[cand[keep]];
      if (std::fabs(cum - p.top_p * total) < 1e-4 * total) e.ambiguous = true;
      ++keep;
    }
    cand.resize(std::max<size_t>(keep, 1));
  }
  std::vector<int> kept;
  for (int i : cand) {
    if (pr[i] >= p.min_p * 1.0) kept.push_back(i);
  }
  double kept_total = 0.0;
  for (int i : kept) kept_total += pr[i];
  const double target = p.u * kept_total;
  double cum = 0.0;
  for (int i : kept) {
    cum += pr[i];
    if (std::fabs(cum - target) < 1e-4 * kept_total) e.ambiguous = true;
    if (cum > target) {
      e.id = i;
      return e;
    }
  }
  e.id = kept.empty() ? best : kept.back();
  e.ambiguous = true;
  return e;
}

TEST(CudaSamplingTest, RejectsBadArguments) {
  RowSampling p;
  EXPECT_TRUE(RowSamplingValid(p).ok());
  p.top_p = 0.0f;
  EXPECT_EQ(RowSamplingValid(p).code(), absl::StatusCode::kInvalidArgument);
  p = RowSampling();
  p.u = 1.0;
  EXPECT_EQ(RowSamplingValid(p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SampleTokens(nullptr, 1, 0, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SampleTokens(nullptr, 0, 10, nullptr, nullptr).ok());
}

TEST(CudaSamplingTest, MatchesHostSemantics) {
  LOOM_SKIP_WITHOUT_GPU();
  const int vocab = 49152;
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<RowSampling> params;
  const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f};
  const int ks[] = {0, 1, 40, 1000};
  const float ps[] = {1.0f, 0.9f, 0.5f};
  const float min_ps[] = {0.0f, 0.05f};
  for (float t : temps) {
    for (int k : ks) {
      for (float tp : ps) {
        for (float mp : min_ps) {
          for (int rep = 0; rep < 2; ++rep) {
            params.push_back(RowSampling{t, k, tp, mp, unif(rng)});
          }
        }
      }
    }
  }
  const int n = static_cast<int>(params.size());
  std::vector<float> logits(size_t(n) * vocab);
  for (float& x : logits) x = logit(rng);
  logits[5] = NAN;                  // row 0: NaN counts as -inf
  logits[vocab + 9] = INFINITY;     // row 1: +inf is the largest float -> argmax 9
  for (int r = 2; r < 4; ++r) {     // rows 2, 3: a tie for the max -> lowest id
    logits[size_t(r) * vocab + 100] = 50.0f;
    logits[size_t(r) * vocab + 7] = 50.0f;
  }
  auto dl = DeviceBuffer<float>::FromHost(logits);
  auto dp = DeviceBuffer<RowSampling>::FromHost(params);
  auto di = DeviceBuffer<int32_t>::Allocate(n);
  ASSERT_TRUE(dl.ok() && dp.ok() && di.ok());
  ASSERT_TRUE(SampleTokens(dl->get(), n, vocab, dp->get(), di->get()).ok());
  const std::vector<int32_t> got = *di->ToHost();
  int compared = 0;
  for (int r = 0; r < n; ++r) {
    const Expected e = Reference(logits.data() + size_t(r) * vocab, vocab, params[r]);
    if (e.ambiguous) continue;
    ++compared;
    EXPECT_EQ(got[r], e.id) << "row " << r << " T=" << params[r].temperature
                            << " k=" << params[r].top_k << " p=" << params[r].top_p
                            << " min_p=" << params[r].min_p << " u=" << params[r].u;
  }
  EXPECT_GE(compared, n * 9 / 10) << "too many ambiguous rows to be a test";
  EXPECT_EQ(got[1], 9);
  EXPECT_EQ(got[2], 7);
}

}  // namespace
}  // namespace loom::kernels::cuda
