#include "models/lora/lora_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace loom::testing {

LlamaConfig TinyLoraBase(RopeLayout layout) {
  LlamaConfig c;
  c.name = "tiny";
  c.vocab_size = 40;
  c.hidden = 64;
  c.intermediate = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.rope_layout = layout;
  return c;
}

std::string FreshDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = tmp != nullptr ? tmp : "/tmp";
  const std::string dir =
      absl::StrFormat("%s/lora_%s_%d_%d", root, tag, static_cast<int>(::getpid()), counter++);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string WriteTestPeft(const LlamaConfig& base, const SyntheticAdapterSpec& spec,
                          const std::string& tag, SyntheticAdapter* out) {
  auto ad = MakeSyntheticAdapter(base, spec);
  EXPECT_TRUE(ad.ok()) << ad.status();
  if (!ad.ok()) return "";
  const std::string dir = FreshDir(tag);
  const absl::Status st = WritePeftAdapter(*ad, dir);
  EXPECT_TRUE(st.ok()) << st;
  if (out != nullptr) *out = *std::move(ad);
  return dir;
}

int ProjectionIndex(const LoraAdapter& adapter, int layer, LoraTarget t) {
  const auto& p = adapter.projections();
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].layer == layer && p[i].target == t) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace loom::testing
