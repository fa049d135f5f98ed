// PermuteLoraAdapter: on a tiny GQA config with random channel orders, the permuted
// adapter's delta on the permuted input is the original delta, permuted like the quantized
// base's output (gate/up by silu_mul, others unchanged); unpermuted layers are copies.
#include "models/lora/adapter_permutation.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "models/lora/lora_test_util.h"

namespace loom {
namespace {

std::vector<int32_t> RandomPerm(int k, std::mt19937& rng) {
  std::vector<int32_t> p(k);
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

// delta[o] = scale * sum_r B[o, r] * sum_j A[r, j] * x[j], in double (order-free up to
// double rounding, far below float precision).
std::vector<double> Delta(const LoraAdapter& a, size_t i, const std::vector<float>& x) {
  const LoraProjectionInfo& p = a.projections()[i];
  std::vector<double> v(p.rank, 0.0), y(p.h_out, 0.0);
  for (int r = 0; r < p.rank; ++r) {
    for (int j = 0; j < p.h_in; ++j) {
      v[r] += static_cast<double>(Bf16ToFp32(a.a(i)[r * p.h_in + j])) * x[j];
    }
  }
  for (int o = 0; o < p.h_out; ++o) {
    for (int r = 0; r < p.rank; ++r) {
      y[o] += static_cast<double>(Bf16ToFp32(a.b(i)[o * p.rank + r])) * v[r];
    }
    y[o] *= p.scale;
  }
  return y;
}

TEST(AdapterPermutationTest, DeltaFollowsTheChannelOrders) {
  const LlamaConfig cfg = testing::TinyLoraBase();
  std::vector<LoraProjectionInfo> infos;
  for (int l = 0; l < cfg.n_layers; ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const ProjectionShape sh = BaseProjectionShape(cfg, t);
      infos.push_back({l, t, 3, 0.75f, sh.h_in, sh.h_out});
    }
  }
  auto adapter = LoraAdapter::Create("a", "src", AdapterFormat::kInMemory, cfg.n_layers, infos);
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (size_t i = 0; i < (*adapter)->projections().size(); ++i) {
    const LoraProjectionInfo& p = (*adapter)->projections()[i];
    for (int k = 0; k < p.rank * p.h_in; ++k) (*adapter)->mutable_a(i)[k] = Fp32ToBf16(g(rng));
    for (int k = 0; k < p.h_out * p.rank; ++k) (*adapter)->mutable_b(i)[k] = Fp32ToBf16(g(rng));
  }
  const int qd = cfg.n_heads * cfg.head_dim;
  // Layer 0 permuted everywhere, layer 1 identity (nullptr).
  std::vector<int32_t> attn_norm = RandomPerm(cfg.hidden, rng), attn_out = RandomPerm(qd, rng),
                       ffn_norm = RandomPerm(cfg.hidden, rng),
                       silu_mul = RandomPerm(cfg.intermediate, rng);
  std::vector<LayerChannelOrder> orders(cfg.n_layers);
  orders[0] = {attn_norm.data(), attn_out.data(), ffn_norm.data(), silu_mul.data()};
  auto permuted = PermuteLoraAdapter(**adapter, orders);
  ASSERT_TRUE(permuted.ok()) << permuted.status();
  ASSERT_EQ((*permuted)->projections().size(), (*adapter)->projections().size());
  EXPECT_EQ((*permuted)->id(), "a");

  for (size_t i = 0; i < infos.size(); ++i) {
    const LoraProjectionInfo& p = (*adapter)->projections()[i];
    EXPECT_EQ((*permuted)->Pair(p.layer, p.target)->scale, p.scale);
    const int32_t* in = nullptr;
    const int32_t* out = nullptr;
    if (p.layer == 0) {
      switch (p.target) {
        case LoraTarget::kQ: case LoraTarget::kK: case LoraTarget::kV: in = attn_norm.data(); break;
        case LoraTarget::kO: in = attn_out.data(); break;
        case LoraTarget::kGate: case LoraTarget::kUp: in = ffn_norm.data(); out = silu_mul.data(); break;
        case LoraTarget::kDown: in = silu_mul.data(); break;
      }
    }
    std::vector<float> x(p.h_in), xp(p.h_in);
    for (float& v : x) v = g(rng);
    for (int j = 0; j < p.h_in; ++j) xp[j] = x[in ? in[j] : j];
    const std::vector<double> y = Delta(**adapter, i, x);
    const std::vector<double> yp = Delta(**permuted, i, xp);
    for (int o = 0; o < p.h_out; ++o) {
      ASSERT_NEAR(yp[o], y[out ? out[o] : o], 1e-9 * (1 + std::abs(y[o])))
          << "layer " << p.layer << " " << PeftModuleName(p.target) << " out " << o;
    }
    if (p.layer == 1) {
      const size_t n = static_cast<size_t>(p.rank) * (p.h_in + p.h_out);
      EXPECT_TRUE(std::equal((*adapter)->a(i), (*adapter)->a(i) + n, (*permuted)->a(i)))
          << "identity orders copy the weights";
    }
  }

  // A wrong input order (attn_norm's applied to ffn_norm's inputs) breaks it: the check
  // above can fail.
  std::vector<LayerChannelOrder> wrong = orders;
  wrong[0].ffn_norm = attn_norm.data();
  auto bad = PermuteLoraAdapter(**adapter, wrong);
  ASSERT_TRUE(bad.ok());
  for (size_t i = 0; i < infos.size(); ++i) {
    const LoraProjectionInfo& p = (*adapter)->projections()[i];
    if (p.layer != 0 || p.target != LoraTarget::kGate) continue;
    std::vector<float> x(p.h_in), xp(p.h_in);
    for (float& v : x) v = g(rng);
    for (int j = 0; j < p.h_in; ++j) xp[j] = x[ffn_norm[j]];
    const std::vector<double> y = Delta(**adapter, i, x), yp = Delta(**bad, i, xp);
    double err = 0;
    for (int o = 0; o < p.h_out; ++o) err = std::max(err, std::abs(yp[o] - y[silu_mul[o]]));
    EXPECT_GT(err, 0.1);
  }
}

TEST(AdapterPermutationTest, RefusesLayersWithoutAnOrder) {
  const LlamaConfig cfg = testing::TinyLoraBase();
  const ProjectionShape sh = BaseProjectionShape(cfg, LoraTarget::kQ);
  auto adapter = LoraAdapter::Create("a", "src", AdapterFormat::kInMemory, cfg.n_layers,
                                     {{1, LoraTarget::kQ, 2, 1.0f, sh.h_in, sh.h_out}});
  ASSERT_TRUE(adapter.ok());
  std::vector<LayerChannelOrder> one(1);
  EXPECT_EQ(PermuteLoraAdapter(**adapter, one).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
