// PagedAttention / AppendKv of CpuBackend against ReferenceBackend on random,
// non-contiguous page tables, with GQA 9:3 and several sequences of different lengths
// whose tokens sit at different positions in one batch, for every KV cache dtype (FP16,
// INT8, INT4-asymmetric); plus attention invariance and the quantized caches' accuracy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/reference_backend.h"
#include "kernels/cpu/test_util.h"
#include "kernels/kv_quant.h"

namespace loom::kernels {
namespace {

using testing::RandomFloats;

// Sequences with the given lengths, pages drawn at random from a shared pool; the batch
// holds, for each sequence, the tokens at `positions_per_seq` (clamped to its length).
struct Scenario {
  KvLayout layout;
  int n_heads = 0;
  std::vector<int32_t> indptr, table, seq_of_token, positions;
  std::vector<uint8_t> k_pool, v_pool;
  std::vector<float> q;
  AttentionBatch batch() const {
    return AttentionBatch{static_cast<int>(positions.size()), seq_of_token.data(),
                          positions.data(), indptr.data(), table.data()};
  }
};

constexpr KvDtype kAllDtypes[] = {KvDtype::kF16, KvDtype::kInt8, KvDtype::kInt4};

Scenario Make(int head_dim, int page_size, const std::vector<int>& lengths, uint32_t seed,
              KvDtype dtype = KvDtype::kF16) {
  Scenario s;
  s.layout = KvLayout{page_size, 3, head_dim, dtype};
  s.n_heads = 9;
  std::mt19937 rng(seed);
  int total_pages = 0;
  for (int len : lengths) total_pages += (len + page_size - 1) / page_size;
  std::vector<int32_t> perm(total_pages + 5);  // a few pages stay unused
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  s.indptr.push_back(0);
  int next = 0;
  for (int len : lengths) {
    for (int p = 0; p < (len + page_size - 1) / page_size; ++p) s.table.push_back(perm[next++]);
    s.indptr.push_back(static_cast<int32_t>(s.table.size()));
  }
  const size_t pool = perm.size() * s.layout.page_bytes();
  // Unused slots must never be read: 0x7E7E is an FP16 NaN, as a value or as a row's scale.
  s.k_pool.assign(pool, 0x7E);
  s.v_pool.assign(pool, 0x7E);
  // Fill every sequence's cache through AppendKv of the reference, all positions at once.
  AttentionBatch fill;
  std::vector<int32_t> seq, pos;
  for (int si = 0; si < static_cast<int>(lengths.size()); ++si) {
    for (int p = 0; p < lengths[si]; ++p) { seq.push_back(si); pos.push_back(p); }
  }
  fill = AttentionBatch{static_cast<int>(pos.size()), seq.data(), pos.data(), s.indptr.data(),
                        s.table.data()};
  const int kv = 3 * head_dim;
  const auto k = RandomFloats(pos.size() * kv, seed + 1, 1.5f);
  const auto v = RandomFloats(pos.size() * kv, seed + 2);
  CreateReferenceBackend()->AppendKv(s.layout, fill, k.data(), v.data(), s.k_pool.data(),
                                     s.v_pool.data());
  // Batch: interleave sequences; each contributes its last position and some earlier ones.
  for (int si = 0; si < static_cast<int>(lengths.size()); ++si) {
    const int len = lengths[si];
    for (int p : {len - 1, len / 2, 0}) {
      if (std::find(s.positions.begin(), s.positions.end(), p) != s.positions.end() &&
          !s.seq_of_token.empty() && s.seq_of_token.back() == si) continue;
      s.seq_of_token.push_back(si);
      s.positions.push_back(p);
    }
  }
  s.q = RandomFloats(s.positions.size() * s.n_heads * head_dim, seed + 3, 2.0f);
  return s;
}

TEST(AttentionTest, AppendKvIsBitwiseReference) {
  for (KvDtype dtype : kAllDtypes) {
  const Scenario s = Make(64, 16, {5, 40}, 1, dtype);
  for (CpuIsa isa : {CpuIsa::kScalar, BestCpuIsa()}) {
    auto be = CreateCpuBackendWithIsa(2, isa);
    Scenario c = s;
    std::fill(c.k_pool.begin(), c.k_pool.end(), 0);
    std::fill(c.v_pool.begin(), c.v_pool.end(), 0);
    Scenario r = c;
    const AttentionBatch b = s.batch();
    const auto k = RandomFloats(b.n_tokens * 3 * 64, 9, 100.0f);
    const auto v = RandomFloats(b.n_tokens * 3 * 64, 10, 1e-4f);  // includes fp16 subnormals
    be->AppendKv(c.layout, b, k.data(), v.data(), c.k_pool.data(), c.v_pool.data());
    CreateReferenceBackend()->AppendKv(r.layout, b, k.data(), v.data(), r.k_pool.data(),
                                       r.v_pool.data());
    EXPECT_EQ(c.k_pool, r.k_pool) << KvDtypeName(dtype);
    EXPECT_EQ(c.v_pool, r.v_pool) << KvDtypeName(dtype);
  }
  }
}

TEST(AttentionTest, MatchesReferenceOnRandomPageTables) {
  for (KvDtype dtype : kAllDtypes) {
  // 48: generic vector path; 20: scalar path (and 40 for INT4, which vectorises by 16).
  for (int head_dim : {64, 128, 48, 20, 40}) {
    for (int page_size : {16, 5}) {
      const Scenario s =
          Make(head_dim, page_size, {1, 17, 40, 100}, head_dim + page_size, dtype);
      const AttentionBatch b = s.batch();
      const size_t out_n = s.q.size();
      std::vector<float> want(out_n);
      CreateReferenceBackend()->PagedAttention(s.layout, b, s.q.data(), s.n_heads,
                                               s.k_pool.data(), s.v_pool.data(), want.data());
      for (CpuIsa isa : {CpuIsa::kScalar, BestCpuIsa()}) {
        for (int threads : {1, 2, 3}) {
          auto be = CreateCpuBackendWithIsa(threads, isa);
          std::vector<float> out(out_n, NAN);
          be->PagedAttention(s.layout, b, s.q.data(), s.n_heads, s.k_pool.data(),
                             s.v_pool.data(), out.data());
          // Outputs are convex combinations of values in [-1, 1]: absolute tolerance.
          for (size_t i = 0; i < out_n; ++i) {
            ASSERT_NEAR(out[i], want[i], 2e-5)
                << KvDtypeName(dtype) << " d=" << head_dim << " ps=" << page_size
                << " isa=" << CpuIsaName(isa) << " threads=" << threads << " i=" << i;
          }
        }
      }
    }
  }
  }
}

// A token's output is bitwise the same whatever else is in the batch and however many
// threads run, since each (token, head) is computed alone in a fixed order. The 9-token
// batch runs as one work item per token (all kv heads, 1-2 threads) and per (token, kv
// head) with 3 threads and for the one-token batches: both splits are compared.
TEST(AttentionTest, TokenOutputIsBatchAndThreadInvariant) {
  for (KvDtype dtype : kAllDtypes) {
  const Scenario s = Make(64, 16, {3, 33, 70}, 77, dtype);
  const AttentionBatch b = s.batch();
  const int per_token = s.n_heads * 64;
  for (CpuIsa isa : {CpuIsa::kScalar, BestCpuIsa()}) {
    auto be1 = CreateCpuBackendWithIsa(1, isa);
    std::vector<float> full(s.q.size());
    be1->PagedAttention(s.layout, b, s.q.data(), s.n_heads, s.k_pool.data(), s.v_pool.data(),
                        full.data());
    for (int threads : {2, 3}) {
      auto be = CreateCpuBackendWithIsa(threads, isa);
      std::vector<float> again(s.q.size());
      be->PagedAttention(s.layout, b, s.q.data(), s.n_heads, s.k_pool.data(),
                         s.v_pool.data(), again.data());
      EXPECT_EQ(0, std::memcmp(again.data(), full.data(), sizeof(float) * full.size()));
    }
    for (int t = 0; t < b.n_tokens; ++t) {
      AttentionBatch one{1, b.seq_of_token + t, b.positions + t, b.page_indptr, b.page_table};
      std::vector<float> out(per_token);
      be1->PagedAttention(s.layout, one, s.q.data() + t * per_token, s.n_heads,
                          s.k_pool.data(), s.v_pool.data(), out.data());
      EXPECT_EQ(0, std::memcmp(out.data(), full.data() + t * per_token,
                               sizeof(float) * per_token))
          << KvDtypeName(dtype) << " " << CpuIsaName(isa) << " token " << t;
    }
  }
  }
}

// The quantized caches against exact attention (double precision, on the unrounded K/V):
// the RMS error of the outputs, relative to the RMS of the outputs, stays within what the
// format's step implies. Rows are Hadamard-rotated (head_dim 64), which turns uniform
// values into near-Gaussian ones: an INT8 step is ~1/40 of the row's standard deviation,
// an INT4 step ~1/3 of it; attention averages the V errors over many positions, so the
// output error is a fraction of one step (measured: 5.6e-3 and 8.7e-2).
TEST(AttentionTest, QuantizedCachesStayCloseToExactAttention) {
  const int d = 64, page = 16;
  const std::vector<int> lengths = {30, 100};
  std::vector<std::pair<KvDtype, double>> bounds = {
      {KvDtype::kF16, 1e-3}, {KvDtype::kInt8, 1.5e-2}, {KvDtype::kInt4, 0.15}};
  for (auto [dtype, bound] : bounds) {
    const Scenario s = Make(d, page, lengths, 5, dtype);
    const AttentionBatch b = s.batch();
    // The K/V that Make fed AppendKv (same seeds), then exact attention over them.
    std::vector<int32_t> base(lengths.size() + 1, 0);
    for (size_t i = 0; i < lengths.size(); ++i) base[i + 1] = base[i] + lengths[i];
    const auto k = RandomFloats(static_cast<size_t>(base.back()) * 3 * d, 6, 1.5f);
    const auto v = RandomFloats(static_cast<size_t>(base.back()) * 3 * d, 7);
    std::vector<float> want(s.q.size());
    for (int t = 0; t < b.n_tokens; ++t) {
      for (int h = 0; h < s.n_heads; ++h) {
        const int kvh = h / 3, row0 = base[b.seq_of_token[t]];
        const float* q = s.q.data() + (static_cast<size_t>(t) * s.n_heads + h) * d;
        std::vector<double> w(b.positions[t] + 1);
        double mx = -1e300, den = 0.0;
        for (int p = 0; p <= b.positions[t]; ++p) {
          const float* kr = k.data() + (static_cast<size_t>(row0 + p) * 3 + kvh) * d;
          double dot = 0.0;
          for (int i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * kr[i];
          w[p] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, w[p]);
        }
        for (double& x : w) { x = std::exp(x - mx); den += x; }
        for (int i = 0; i < d; ++i) {
          double acc = 0.0;
          for (int p = 0; p <= b.positions[t]; ++p) {
            acc += w[p] * v[(static_cast<size_t>(row0 + p) * 3 + kvh) * d + i];
          }
          want[(static_cast<size_t>(t) * s.n_heads + h) * d + i] = static_cast<float>(acc / den);
        }
      }
    }
    std::vector<float> out(s.q.size());
    CreateCpuBackendWithIsa(2, BestCpuIsa())
        ->PagedAttention(s.layout, b, s.q.data(), s.n_heads, s.k_pool.data(), s.v_pool.data(),
                         out.data());
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < out.size(); ++i) {
      err += (out[i] - want[i]) * (out[i] - want[i]);
      ref += want[i] * want[i];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, bound) << KvDtypeName(dtype);
    std::printf("%s KV cache: relative RMS error of attention outputs %.2e\n",
                std::string(KvDtypeName(dtype)).c_str(), rel);
  }
}

}  // namespace
}  // namespace loom::kernels
