// The forward pass on a Hugging Face directory (rope on (i, i + d/2) pairs, q/k rows in HF
// order) gives the same logits as on the GGUF it was exported from (rope on adjacent
// pairs, q/k rows permuted by llama.cpp's converter). Both models are F32 (the GGUF
// dequantized in memory, the HF directory exported as F32 safetensors), so they hold the
// same numbers and only the layouts differ: a wrong rope pairing or a wrong q/k
// permutation moves logits by whole units, float summation order by ~1e-5.
#include <cmath>
#include <cstdlib>
#include <random>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/llama/llama_model.h"
#include "models/testing/dequantized_model.h"
#include "models/testing/test_model.h"
#include "models/weights/hf_exporter.h"

namespace loom {
namespace {

std::vector<float> Logits(const LlamaModel& m, const std::vector<int32_t>& tokens) {
  KvCacheOptions o;
  o.n_pages = 8;
  auto kv = PagedKvCache::Create(m.config(), o);
  EXPECT_TRUE(kv.ok());
  SequenceChunk c;
  c.kv_seq = (*kv)->NewSequence();
  c.tokens = tokens;
  c.logits = SequenceChunk::Logits::kAll;
  EXPECT_TRUE((*kv)->Reserve(c.kv_seq, tokens.size()).ok());
  auto plan = BatchPlan::Build({c}, **kv, m.config().vocab_size);
  EXPECT_TRUE(plan.ok());
  std::vector<float> out(tokens.size() * m.config().vocab_size);
  ForwardWorkspace ws;
  EXPECT_TRUE(m.Forward(*plan, kv->get(), &ws, out.data()).ok());
  return out;
}

TEST(HfLayoutTest, HfDirectoryMatchesTheGgufItCameFrom) {
  auto gguf = ModelSource::Open(testing::DefaultModelPath());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/hf";
  ASSERT_TRUE(ExportHfDirectory(**gguf, dir, DType::kF32, 2).ok());
  auto hf = ModelSource::Open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  ASSERT_EQ((*hf)->config().rope_layout, RopeLayout::kHalves);
  ASSERT_EQ((*gguf)->config().rope_layout, RopeLayout::kAdjacentPairs);

  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackend(2);
  auto a = LlamaModel::Create(testing::DequantizedCopy(**gguf), backend.get());
  auto b = LlamaModel::Create(*std::move(hf), backend.get());
  ASSERT_TRUE(a.ok() && b.ok());
  std::mt19937 rng(5);
  std::vector<int32_t> tokens(24);
  for (int32_t& t : tokens) t = 3 + static_cast<int32_t>(rng() % 49000);
  const std::vector<float> la = Logits(**a, tokens), lb = Logits(**b, tokens);
  const int vocab = (*a)->config().vocab_size;
  for (size_t p = 0; p < tokens.size(); ++p) {
    float max_abs = 0, max_diff = 0;
    for (int i = 0; i < vocab; ++i) {
      max_abs = std::max(max_abs, std::fabs(la[p * vocab + i]));
      max_diff = std::max(max_diff, std::fabs(la[p * vocab + i] - lb[p * vocab + i]));
    }
    // F32 everywhere; K/V pass through the FP16 cache, where a last-bit difference can
    // flip one rounding (2^-11): allow 1e-3 of the logit scale.
    EXPECT_LT(max_diff, 1e-3f * max_abs) << "position " << p;
  }
}

}  // namespace
}  // namespace loom
