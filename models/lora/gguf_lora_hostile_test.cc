// LoadGgufLora / LoadAdapter on GGUF-LoRA files built to crash or escape the loader.
#include <unistd.h>

#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/lora/adapter_loader.h"
#include "models/lora/gguf_lora_loader.h"
#include "models/lora/lora_test_util.h"
#include "models/weights/gguf_writer.h"

namespace loom {
namespace {

using ::loom::testing::FreshDir;
using ::loom::testing::TinyLoraBase;
using ::testing::HasSubstr;
using ::testing::Not;

// A GGUF-LoRA for TinyLoraBase: attn_q of layer 0 at rank 4, alpha as given, plus the
// tensor `extra` (F32, 1 element) when not empty.
std::string WriteLora(const std::string& path, GgufValue alpha, const std::string& extra = "",
                      float a_value = 0.01f) {
  GgufWriter w;
  w.AddString("general.type", "adapter");
  w.AddString("adapter.type", "lora");
  w.AddValue("adapter.lora.alpha", alpha);
  EXPECT_TRUE(w.AddF32Tensor("blk.0.attn_q.weight.lora_a", {4, 64},
                             std::vector<float>(4 * 64, a_value)).ok());
  EXPECT_TRUE(w.AddF32Tensor("blk.0.attn_q.weight.lora_b", {64, 4},
                             std::vector<float>(64 * 4, 0.01f)).ok());
  if (!extra.empty()) EXPECT_TRUE(w.AddF32Tensor(extra, {1}, {0.0f}).ok());
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

GgufValue F64(double v) {
  GgufValue g;
  g.type = GgufType::kF64;
  g.f = v;
  return g;
}

absl::Status Load(const std::string& path, const AdapterLimits& limits = {}) {
  return LoadGgufLora(path, TinyLoraBase(), limits).status();
}

TEST(GgufLoraHostile, AValidFileLoads) {
  EXPECT_TRUE(Load(WriteLora(FreshDir("ok") + "/a.gguf", F64(8))).ok());
}

TEST(GgufLoraHostile, A60kCharacterTensorNameIsRefusedAndEchoedBounded) {
  // std::regex recursed per character of "blk.0.<60k letters>.weight.lora_a" (SIGSEGV).
  const std::string name = "blk.0." + std::string(60000, 'a') + ".weight.lora_a";
  const absl::Status s = Load(WriteLora(FreshDir("long") + "/a.gguf", F64(8), name));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("name longer than 256 bytes"));
  EXPECT_LT(s.message().size(), 1000u);
}

TEST(GgufLoraHostile, AlphaThatOverflowsTheFloatScaleIsRefusedNamingTheField) {
  const absl::Status s = Load(WriteLora(FreshDir("alpha") + "/a.gguf", F64(1e39)));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("adapter.lora.alpha = 1e+39"));
}

TEST(GgufLoraHostile, NonFiniteAndAbsurdAlphasAreRefused) {
  for (double alpha : {std::numeric_limits<double>::infinity(),
                       std::numeric_limits<double>::quiet_NaN(), 1e7, -1e7}) {
    const absl::Status s = Load(WriteLora(FreshDir("alpha") + "/a.gguf", F64(alpha)));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << alpha << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("adapter.lora.alpha")) << alpha;
  }
  EXPECT_TRUE(Load(WriteLora(FreshDir("alpha") + "/a.gguf", F64(4 * kMaxLoraScale))).ok());
}

TEST(GgufLoraHostile, AFiniteWeightThatRoundsToInfinityInBf16IsRefused) {
  const float big = std::numeric_limits<float>::max();  // BF16(FLT_MAX) is +inf
  const absl::Status s = Load(WriteLora(FreshDir("big") + "/a.gguf", F64(8), "", big));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("non-finite value"));
}

TEST(GgufLoraHostile, ASymlinkOutsideTheRootsIsPermissionDenied) {
  const std::string root = FreshDir("root"), outside = FreshDir("outside");
  const std::string target = WriteLora(outside + "/valid.gguf", F64(8));
  const std::string link = root + "/tenant.gguf";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  AdapterLimits limits;
  limits.files.roots = {root};
  absl::StatusOr<std::unique_ptr<LoraAdapter>> ad = LoadAdapter(link, TinyLoraBase(), limits);
  EXPECT_EQ(ad.status().code(), absl::StatusCode::kPermissionDenied) << ad.status();
  EXPECT_THAT(std::string(ad.status().message()), Not(HasSubstr(outside)));
  limits.files.roots = {outside};
  EXPECT_TRUE(LoadAdapter(target, TinyLoraBase(), limits).ok());
}

}  // namespace
}  // namespace loom
