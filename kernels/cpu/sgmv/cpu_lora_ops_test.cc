// CpuLoraOps against ReferenceLoraOps (shapes of real models, mixed ranks, random
// segmentations, thread counts 1..3, scalar and AVX2), and its batch invariance: a token's
// v and y are bitwise the same whatever the segmentation, the batch around it, the thread
// count or the ISA, and BGMV agrees bitwise with SGMV.
#include "kernels/cpu/sgmv/cpu_lora_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sgmv/lora_test_util.h"
#include "kernels/cpu/sgmv/reference_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace loom::kernels {
namespace {

using testing::AddRandomAdapter;
using testing::MakeSegments;
using testing::RandomVector;
using testing::TestAdapter;

constexpr float kRelTol = 1e-5f;
constexpr float kSentinel = 12345.0f;  // v entries no segment may write

struct Shape {
  const char* name;
  int h_in;
  int h_out;
};
// SmolLM2-135M (hidden 576, kv 192, ffn 1536) projections, plus an odd one for tails.
constexpr Shape kSmolShapes[] = {
    {"smol_q", 576, 576}, {"smol_kv", 576, 192}, {"smol_up", 576, 1536},
    {"smol_down", 1536, 576}, {"odd", 100, 37}};

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Owns CpuLoraOps for one (isa, threads) configuration.
struct Config {
  LoraIsa isa;
  int threads;
  std::string Name() const {
    return std::string(isa == LoraIsa::kAvx2 ? "avx2" : "scalar") + "_t" +
           std::to_string(threads);
  }
};

class Harness {
 public:
  explicit Harness(Config c)
      : pool_(c.threads > 1 ? std::make_unique<ThreadPool>(c.threads) : nullptr) {
    auto ops = CreateCpuLoraOpsWithIsa(pool_.get(), c.isa);
    if (ops.ok()) ops_ = *std::move(ops);
  }
  LoraOps* ops() { return ops_.get(); }

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<LoraOps> ops_;
};

std::vector<Config> AllConfigs() {
  std::vector<Config> out;
  for (LoraIsa isa : {LoraIsa::kScalar, LoraIsa::kAvx2}) {
    if (isa == LoraIsa::kAvx2 && !CreateCpuLoraOpsWithIsa(nullptr, isa).ok()) continue;
    for (int t : {1, 2, 3}) out.push_back({isa, t});
  }
  return out;
}

// Runs SGMV shrink + expand with `ops` and checks v and y against the reference (the
// reference expand is fed the same v, so each stage is checked on its own). Rows of
// tokens without a valid adapter must be untouched.
void CheckAgainstReference(LoraOps& ops, int h_in, int h_out, int v_stride,
                           const std::vector<LoraSegment>& segs, int n_tokens, uint32_t seed,
                           const std::string& what) {
  SCOPED_TRACE(what + " on " + std::string(ops.name()));
  const std::vector<float> x = RandomVector(static_cast<size_t>(n_tokens) * h_in, seed);
  const std::vector<float> y0 = RandomVector(static_cast<size_t>(n_tokens) * h_out, seed + 1);
  std::vector<float> v(static_cast<size_t>(n_tokens) * v_stride, kSentinel);
  std::vector<float> v_ref = v;
  const int n_segs = static_cast<int>(segs.size());
  ops.SgmvShrink(x.data(), h_in, segs.data(), n_segs, v.data(), v_stride);
  auto ref = CreateReferenceLoraOps();
  ref->SgmvShrink(x.data(), h_in, segs.data(), n_segs, v_ref.data(), v_stride);

  std::vector<float> y = y0, y_ref = y0;
  ops.SgmvExpand(v.data(), v_stride, segs.data(), n_segs, h_out, y.data());
  ref->SgmvExpand(v.data(), v_stride, segs.data(), n_segs, h_out, y_ref.data());

  for (const LoraSegment& s : segs) {
    for (int t = s.begin; t < s.end; ++t) {
      if (s.lora == nullptr) {
        for (int j = 0; j < v_stride; ++j) ASSERT_EQ(v[t * v_stride + j], kSentinel);
        for (int o = 0; o < h_out; ++o) {
          ASSERT_TRUE(SameBits(y[t * h_out + o], y0[t * h_out + o])) << "t=" << t;
        }
        continue;
      }
      const LoraPair& l = *s.lora;
      // Shrink: row scale = max_r sum_k |x a|.
      double scale_v = 0;
      for (int r = 0; r < l.rank; ++r) {
        double sum = 0;
        for (int k = 0; k < h_in; ++k) {
          sum += std::fabs(x[t * h_in + k] * Bf16ToFp32(l.a[static_cast<size_t>(r) * h_in + k]));
        }
        scale_v = std::max(scale_v, sum);
      }
      for (int r = 0; r < l.rank; ++r) {
        ASSERT_NEAR(v[t * v_stride + r], v_ref[t * v_stride + r], kRelTol * scale_v)
            << "t=" << t << " r=" << r << " rank=" << l.rank;
      }
      for (int j = l.rank; j < v_stride; ++j) ASSERT_EQ(v[t * v_stride + j], kSentinel);
      // Expand: row scale = max_o |y0| + |scale| sum_r |v b|.
      double scale_y = 0;
      for (int o = 0; o < h_out; ++o) {
        double sum = 0;
        for (int r = 0; r < l.rank; ++r) {
          sum += std::fabs(v[t * v_stride + r] * Bf16ToFp32(l.b[static_cast<size_t>(o) * l.rank + r]));
        }
        scale_y = std::max(scale_y, std::fabs(y0[t * h_out + o]) + std::fabs(l.scale) * sum);
      }
      for (int o = 0; o < h_out; ++o) {
        ASSERT_NEAR(y[t * h_out + o], y_ref[t * h_out + o], kRelTol * scale_y)
            << "t=" << t << " o=" << o << " rank=" << l.rank;
      }
    }
  }
}

class CpuLoraOpsTest : public ::testing::TestWithParam<Config> {};

// Every rank on every SmolLM2 projection: a few segments of that rank (one of them without
// an adapter, one empty).
TEST_P(CpuLoraOpsTest, RankGridMatchesReference) {
  Harness h(GetParam());
  ASSERT_NE(h.ops(), nullptr);
  uint32_t seed = 1;
  for (const Shape& sh : kSmolShapes) {
    for (int rank : {1, 2, 7, 8, 16, 33, 64, 128}) {
      std::deque<TestAdapter> pool;
      const LoraPair* a0 = AddRandomAdapter(&pool, sh.h_in, sh.h_out, rank, 0.5f, seed++);
      const LoraPair* a1 = AddRandomAdapter(&pool, sh.h_in, sh.h_out, rank, 2.0f, seed++);
      const std::vector<int> lens = {3, 0, 1, 2, 5};
      const auto segs = MakeSegments(lens, {a0, a1, nullptr, a1, a0});
      CheckAgainstReference(*h.ops(), sh.h_in, sh.h_out, rank + 3, segs, 11, seed++,
                            std::string(sh.name) + " rank " + std::to_string(rank));
    }
  }
}

// 1..64 segments of random lengths (0..4 tokens), adapters of mixed ranks in one call,
// ~15% of segments without an adapter.
TEST_P(CpuLoraOpsTest, RandomSegmentationsMatchReference) {
  Harness h(GetParam());
  ASSERT_NE(h.ops(), nullptr);
  std::mt19937 rng(7);
  const int ranks[] = {1, 2, 7, 8, 16, 33, 64, 128};
  for (int trial = 0; trial < 12; ++trial) {
    const Shape& sh = kSmolShapes[trial % 5];
    std::deque<TestAdapter> pool;
    std::vector<const LoraPair*> adapters;
    for (int i = 0; i < 6; ++i) {
      adapters.push_back(AddRandomAdapter(&pool, sh.h_in, sh.h_out, ranks[(trial + 3 * i) % 8],
                                          0.25f * (i + 1), 100 * trial + i));
    }
    const int n_segs = trial == 0 ? 1 : trial == 1 ? 64 : 1 + static_cast<int>(rng() % 64);
    std::vector<int> lens;
    std::vector<const LoraPair*> loras;
    int n_tokens = 0;
    for (int s = 0; s < n_segs; ++s) {
      lens.push_back(static_cast<int>(rng() % 5));
      n_tokens += lens.back();
      loras.push_back(rng() % 100 < 15 ? nullptr : adapters[rng() % adapters.size()]);
    }
    CheckAgainstReference(*h.ops(), sh.h_in, sh.h_out, 128, MakeSegments(lens, loras), n_tokens,
                          1000 + trial, std::string(sh.name) + " trial " + std::to_string(trial));
  }
}

// Large real-model projections, few tokens.
TEST_P(CpuLoraOpsTest, LargeModelShapesMatchReference) {
  Harness h(GetParam());
  ASSERT_NE(h.ops(), nullptr);
  struct Case {
    const char* name;
    int h_in, h_out, rank;
  };
  const Case cases[] = {
      {"llama2_7b_up", 4096, 11008, 16},
      {"llama3_8b_kv", 4096, 1024, 8},
      {"llama3_8b_down", 14336, 4096, 64},
  };
  std::deque<TestAdapter> pool;
  uint32_t seed = 50;
  for (const Case& c : cases) {
    const LoraPair* a = AddRandomAdapter(&pool, c.h_in, c.h_out, c.rank, 0.125f, seed++);
    const LoraPair* b = AddRandomAdapter(&pool, c.h_in, c.h_out, c.rank / 2 + 1, 1.0f, seed++);
    const auto segs = MakeSegments({2, 1}, {a, b});
    CheckAgainstReference(*h.ops(), c.h_in, c.h_out, c.rank, segs, 3, seed++, c.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, CpuLoraOpsTest, ::testing::ValuesIn(AllConfigs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return i.param.Name(); });

// ---- Batch invariance ----

struct Batch {
  int h_in = 580, h_out = 197, v_stride = 128;  // not multiples of 16 / 8: tails
  std::deque<TestAdapter> pool;
  std::vector<const LoraPair*> adapters;
  std::vector<int> adapter_of;  // per token, -1 = none
  std::vector<float> x, y0;
  int n = 0;
};

Batch MakeBatch(int n, uint32_t seed) {
  Batch b;
  b.n = n;
  const int ranks[] = {16, 7, 64, 1, 33, 128, 8};
  for (int i = 0; i < 7; ++i) {
    b.adapters.push_back(AddRandomAdapter(&b.pool, b.h_in, b.h_out, ranks[i], 0.5f + i, seed + i));
  }
  std::mt19937 rng(seed);
  for (int t = 0; t < n; ++t) b.adapter_of.push_back(static_cast<int>(rng() % 8) - 1);
  b.x = RandomVector(static_cast<size_t>(n) * b.h_in, seed + 100);
  b.y0 = RandomVector(static_cast<size_t>(n) * b.h_out, seed + 101);
  return b;
}

// Runs SGMV over the tokens `order` (a permutation/subset of the batch's tokens), grouped
// into segments of consecutive tokens with the same adapter and split further at random;
// returns y rows in the batch's token numbering (untouched rows stay y0).
std::vector<float> RunSgmvOrdered(LoraOps& ops, const Batch& b, const std::vector<int>& order,
                                  uint32_t split_seed) {
  const int m = static_cast<int>(order.size());
  std::vector<float> x(static_cast<size_t>(m) * b.h_in), y(static_cast<size_t>(m) * b.h_out);
  for (int i = 0; i < m; ++i) {
    std::memcpy(&x[i * b.h_in], &b.x[order[i] * b.h_in], b.h_in * sizeof(float));
    std::memcpy(&y[i * b.h_out], &b.y0[order[i] * b.h_out], b.h_out * sizeof(float));
  }
  std::mt19937 rng(split_seed);
  std::vector<LoraSegment> segs;
  for (int i = 0; i < m;) {
    int e = i + 1;
    const int ad = b.adapter_of[order[i]];
    while (e < m && b.adapter_of[order[e]] == ad && rng() % 4 != 0) ++e;
    if (rng() % 3 == 0) segs.push_back(LoraSegment{i, i, b.adapters[0]});  // empty segment
    segs.push_back(LoraSegment{i, e, ad < 0 ? nullptr : b.adapters[ad]});
    i = e;
  }
  std::vector<float> v(static_cast<size_t>(m) * b.v_stride);
  ops.SgmvShrink(x.data(), b.h_in, segs.data(), static_cast<int>(segs.size()), v.data(),
                 b.v_stride);
  ops.SgmvExpand(v.data(), b.v_stride, segs.data(), static_cast<int>(segs.size()), b.h_out,
                 y.data());
  std::vector<float> out = b.y0;
  for (int i = 0; i < m; ++i) {
    std::memcpy(&out[order[i] * b.h_out], &y[i * b.h_out], b.h_out * sizeof(float));
  }
  return out;
}

std::vector<float> RunBgmv(LoraOps& ops, const Batch& b) {
  std::vector<LoraPair> loras;
  for (const LoraPair* p : b.adapters) loras.push_back(*p);
  std::vector<float> y = b.y0, v(static_cast<size_t>(b.n) * b.v_stride);
  ops.Bgmv(b.x.data(), b.h_in, b.n, b.adapter_of.data(), loras.data(), b.h_out, v.data(),
           b.v_stride, y.data());
  return y;
}

void ExpectBitwiseEqual(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(SameBits(a[i], b[i])) << what << " at " << i << ": " << a[i] << " vs " << b[i];
  }
}

TEST(CpuLoraOpsInvarianceTest, TokenResultIndependentOfBatchThreadsAndIsa) {
  const Batch b = MakeBatch(48, 9);
  std::vector<int> sorted(b.n);
  for (int t = 0; t < b.n; ++t) sorted[t] = t;

  // Baseline: each token alone, single-threaded, default ISA.
  Harness solo_h({LoraIsa::kAuto, 1});
  std::vector<float> solo = b.y0;
  for (int t = 0; t < b.n; ++t) {
    const std::vector<float> one = RunSgmvOrdered(*solo_h.ops(), b, {t}, t);
    std::memcpy(&solo[t * b.h_out], &one[t * b.h_out], b.h_out * sizeof(float));
  }
  // The results are not trivially equal to y0.
  int changed = 0;
  for (size_t i = 0; i < solo.size(); ++i) changed += !SameBits(solo[i], b.y0[i]);
  ASSERT_GT(changed, static_cast<int>(solo.size() / 2));

  std::mt19937 rng(3);
  for (const Config& c : AllConfigs()) {
    Harness h(c);
    // The whole batch sorted by position, randomly split.
    ExpectBitwiseEqual(RunSgmvOrdered(*h.ops(), b, sorted, 11), solo, "sorted " + c.Name());
    // Sorted by adapter (as the scheduler does), other splits.
    std::vector<int> by_adapter = sorted;
    std::stable_sort(by_adapter.begin(), by_adapter.end(),
                     [&](int p, int q) { return b.adapter_of[p] < b.adapter_of[q]; });
    ExpectBitwiseEqual(RunSgmvOrdered(*h.ops(), b, by_adapter, 12), solo, "by adapter " + c.Name());
    // A random subset in random order (different batch composition).
    std::vector<int> sub = sorted;
    std::shuffle(sub.begin(), sub.end(), rng);
    sub.resize(17);
    const std::vector<float> part = RunSgmvOrdered(*h.ops(), b, sub, 13);
    for (int t : sub) {
      for (int o = 0; o < b.h_out; ++o) {
        ASSERT_TRUE(SameBits(part[t * b.h_out + o], solo[t * b.h_out + o])) << c.Name();
      }
    }
    // BGMV over the unsorted batch agrees with SGMV bitwise.
    ExpectBitwiseEqual(RunBgmv(*h.ops(), b), solo, "bgmv " + c.Name());
  }
}

// Bgmv against the reference (tolerance), idx -1 rows untouched.
TEST(CpuLoraOpsBgmvTest, MatchesReference) {
  const Batch b = MakeBatch(20, 21);
  auto ref = CreateReferenceLoraOps();
  const std::vector<float> y_ref = RunBgmv(*ref, b);
  for (const Config& c : AllConfigs()) {
    Harness h(c);
    const std::vector<float> y = RunBgmv(*h.ops(), b);
    for (int t = 0; t < b.n; ++t) {
      const int ad = b.adapter_of[t];
      for (int o = 0; o < b.h_out; ++o) {
        const size_t i = static_cast<size_t>(t) * b.h_out + o;
        if (ad < 0) {
          ASSERT_TRUE(SameBits(y[i], b.y0[i]));
          continue;
        }
        // Loose bound from the end-to-end error: |y0| + |scale| * sum |x| * sum|a| * sum|b|
        // is too loose; use the magnitude of the LoRA term's terms instead.
        const LoraPair& l = *b.adapters[ad];
        double bound = std::fabs(b.y0[i]);
        for (int r = 0; r < l.rank; ++r) {
          double vr = 0;
          for (int k = 0; k < b.h_in; ++k) {
            vr += std::fabs(b.x[t * b.h_in + k] * Bf16ToFp32(l.a[static_cast<size_t>(r) * b.h_in + k]));
          }
          bound += std::fabs(l.scale) * vr * std::fabs(Bf16ToFp32(l.b[static_cast<size_t>(o) * l.rank + r]));
        }
        ASSERT_NEAR(y[i], y_ref[i], kRelTol * bound) << c.Name() << " t=" << t << " o=" << o;
      }
    }
  }
}

// Segments that break the REQUIRES are skipped, and the v / y rows stay untouched.
TEST(CpuLoraOpsSkipTest, InvalidSegmentsAreSkipped) {
  std::deque<TestAdapter> pool;
  const LoraPair* big = AddRandomAdapter(&pool, 64, 32, 16, 1.0f, 1);
  LoraPair no_b = *big;
  no_b.b = nullptr;
  LoraPair zero_rank = *big;
  zero_rank.rank = 0;
  auto ops = CreateCpuLoraOps(nullptr);
  const std::vector<LoraSegment> segs = {{0, 1, big}, {1, 2, &zero_rank}, {2, 3, &no_b}};
  const std::vector<float> x = RandomVector(3 * 64, 2), y0 = RandomVector(3 * 32, 3);
  // v_stride 8 < rank 16: nothing at all may be written.
  std::vector<float> v(3 * 8, kSentinel), y = y0;
  ops->SgmvShrink(x.data(), 64, segs.data(), 3, v.data(), 8);
  ops->SgmvExpand(v.data(), 8, segs.data(), 3, 32, y.data());
  for (float f : v) EXPECT_EQ(f, kSentinel);
  ExpectBitwiseEqual(y, y0, "v_stride too small");
  // v_stride 16: only the first segment is computed; the third has no B (v is written by
  // shrink, y is not by expand).
  std::vector<float> v2(3 * 16, kSentinel);
  y = y0;
  ops->SgmvShrink(x.data(), 64, segs.data(), 3, v2.data(), 16);
  ops->SgmvExpand(v2.data(), 16, segs.data(), 3, 32, y.data());
  for (int j = 0; j < 16; ++j) EXPECT_NE(v2[j], kSentinel);
  for (int j = 16; j < 32; ++j) EXPECT_EQ(v2[j], kSentinel);
  for (int o = 0; o < 32; ++o) EXPECT_FALSE(SameBits(y[o], y0[o]));
  for (int i = 32; i < 96; ++i) EXPECT_TRUE(SameBits(y[i], y0[i]));
}

}  // namespace
}  // namespace loom::kernels
