// Teacher-forced logits of Loom's forward pass vs llama.cpp on the same GGUF file
// (tests/golden/logits_smollm2.json, written by scripts/make_golden.py --logits), over
// 5 prompts x 64 positions. Loom quantizes activations exactly as llama.cpp's x86 path
// (Q8_1 blocks with FP16 scales, ties to even), so position 0 of a prompt is bit-identical;
// after that, last-bit differences in attention's float order flip int8 roundings of later
// activations and grow over 30 layers. llama.cpp against ITSELF (whole prompt in one batch
// vs token by token, scripts/llamacpp_self_agreement.py) agrees on 95.3% of top-1 tokens
// with max |logit diff| 2.58: that is the noise floor of this comparison, so the test
// requires 93% top-1 agreement, our argmax always within llama.cpp's top 5, and mean
// |logit diff| over llama.cpp's top-20 below 0.3. A real bug (wrong rope pairing, GQA
// mapping, norm, tied output) drops agreement far below that.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/llama/llama_model.h"
#include "models/testing/test_model.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

std::string GoldenPath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (ws ? ws : "loom") + "/tests/golden/" +
         name;
}

TEST(GoldenLogitsTest, TopOneAgreesWithLlamaCpp) {
  std::ifstream in(GoldenPath("logits_smollm2.json"));
  ASSERT_TRUE(in.good()) << "missing golden file";
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_FALSE(golden.at("settings").at("add_bos").get<bool>());

  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackend(0);
  auto src = ModelSource::Open(testing::DefaultModelPath());
  ASSERT_TRUE(src.ok()) << src.status();
  auto model = LlamaModel::Create(*std::move(src), backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const int vocab = (*model)->config().vocab_size;
  const int n_pos = golden.at("n_positions").get<int>();

  int agree = 0, total = 0, top5_overlap = 0;
  double max_diff = 0, sum_diff = 0;
  int n_diff = 0;
  for (const auto& p : golden.at("prompts")) {
    const std::vector<int32_t> tokens = p.at("tokens").get<std::vector<int32_t>>();
    ASSERT_GE(static_cast<int>(tokens.size()), n_pos);
    KvCacheOptions ko;
    ko.n_pages = static_cast<int32_t>(tokens.size() / 16 + 2);
    auto kv = PagedKvCache::Create((*model)->config(), ko);
    ASSERT_TRUE(kv.ok());
    SequenceChunk chunk;
    chunk.kv_seq = (*kv)->NewSequence();
    chunk.tokens.assign(tokens.begin(), tokens.begin() + n_pos);
    chunk.logits = SequenceChunk::Logits::kAll;
    ASSERT_TRUE((*kv)->Reserve(chunk.kv_seq, n_pos).ok());
    auto plan = BatchPlan::Build({chunk}, **kv, vocab);
    ASSERT_TRUE(plan.ok());
    std::vector<float> logits(static_cast<size_t>(n_pos) * vocab);
    ForwardWorkspace ws;
    ASSERT_TRUE((*model)->Forward(*plan, kv->get(), &ws, logits.data()).ok());
    for (int pos = 0; pos < n_pos; ++pos) {
      const float* row = &logits[static_cast<size_t>(pos) * vocab];
      const auto& g = p.at("positions")[pos];
      const std::vector<int> ids = g.at("top_ids").get<std::vector<int>>();
      const std::vector<double> vals = g.at("top_logits").get<std::vector<double>>();
      int best = 0;
      for (int i = 1; i < vocab; ++i) if (row[i] > row[best]) best = i;
      agree += best == ids[0];
      ++total;
      // Is our argmax within llama.cpp's top 5 (robust near-ties)?
      for (int k = 0; k < 5; ++k) top5_overlap += best == ids[k];
      for (size_t k = 0; k < ids.size(); ++k) {
        const double d = std::fabs(row[ids[k]] - vals[k]);
        max_diff = std::max(max_diff, d);
        sum_diff += d;
        ++n_diff;
      }
    }
  }
  const double rate = static_cast<double>(agree) / total;
  std::printf("golden logits: top-1 agreement %d/%d = %.2f%%, argmax in llama.cpp top-5 "
              "%d/%d, max |logit diff| over top-20 = %.4f, mean = %.4f\n",
              agree, total, 100 * rate, top5_overlap, total, max_diff, sum_diff / n_diff);
  EXPECT_GE(rate, 0.93);
  EXPECT_EQ(top5_overlap, total);
  EXPECT_LT(sum_diff / n_diff, 0.3);
  EXPECT_LT(max_diff, 3.0);  // llama.cpp vs itself: 2.58
}

}  // namespace
}  // namespace loom
