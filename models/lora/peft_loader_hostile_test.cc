// LoadPeftAdapter on adapters built to crash, hang or escape the loader: the probed bug
// classes of issue 16, each with its real hostile input generated here.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/lora/lora_test_util.h"
#include "models/lora/peft_loader.h"
#include "models/lora/peft_writer.h"
#include "models/weights/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using ::loom::testing::FreshDir;
using ::loom::testing::TinyLoraBase;
using ::loom::testing::WriteTestPeft;
using ::testing::HasSubstr;
using ::testing::Not;

SyntheticAdapterSpec Spec() {
  SyntheticAdapterSpec spec;
  spec.rank = 4;
  spec.alpha = 8;
  spec.targets = {LoraTarget::kQ, LoraTarget::kV};
  return spec;
}

void EditConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& fn) {
  std::ifstream in(dir + "/adapter_config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  fn(j);
  ASSERT_TRUE(WriteStringToFile(dir + "/adapter_config.json", j.dump()).ok());
}

absl::Status Load(const std::string& dir, const AdapterLimits& limits = {}) {
  return LoadPeftAdapter(dir, TinyLoraBase(), limits).status();
}

void ExpectRefusal(const absl::Status& s, absl::StatusCode code, const std::string& text) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
  EXPECT_LT(s.message().size(), 2000u) << "the error echoes unbounded text";
}

TEST(PeftHostile, A60kCharacterTensorNameIsRefusedAndEchoedBounded) {
  // std::regex recursed per character here and overflowed the stack (SIGSEGV).
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "longname");
  const std::string name = "base_model.model.model.layers.0.self_attn.q_proj." +
                           std::string(60000, 'x') + ".lora_A.weight";
  ASSERT_TRUE(WriteSafetensors(dir + "/adapter_model.safetensors",
                               {{name, "F32", {1}, std::string(4, '\0')}}, {})
                  .ok());
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "name longer than 256 bytes");
}

TEST(PeftHostile, A30kDeepTargetModulesPatternIsRefusedBeforeCompiling) {
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "deep");
  EditConfig(dir, [](nlohmann::json& j) {
    j["target_modules"] = std::string(30000, '(') + "q_proj" + std::string(30000, ')');
  });
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "target_modules");
}

TEST(PeftHostile, CatastrophicTargetModulesPatternEndsAtOnce) {
  // Backtracking engines take 2^31 steps on each module path here (a hang).
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "catastrophic");
  EditConfig(dir, [](nlohmann::json& j) { j["target_modules"] = "(.|.)*Z"; });
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "selects none");
}

TEST(PeftHostile, CatastrophicRankPatternKeyEndsAtOnce) {
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "catastrophic_rank");
  EditConfig(dir, [](nlohmann::json& j) { j["rank_pattern"] = {{"(.|.)*Z", 2}}; });
  EXPECT_TRUE(Load(dir).ok());  // the key matches nothing; the adapter loads as written
}

TEST(PeftHostile, PatternsRe2CannotMatchAreRefusedNotApproximated) {
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "lookahead");
  EditConfig(dir, [](nlohmann::json& j) { j["target_modules"] = ".*(?=q_proj)q_proj"; });
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "is not supported");
}

TEST(PeftHostile, LoraAlphaThatOverflowsFloatIsRefusedNamingTheField) {
  // 1e39 / 4 is finite as a double but infinite as the float scale (-inf logprobs).
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "alpha1e39");
  EditConfig(dir, [](nlohmann::json& j) { j["lora_alpha"] = 1e39; });
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "lora_alpha = 1e+39");
}

TEST(PeftHostile, FiniteButAbsurdScalesAreRefusedAndTheBoundIsInclusive) {
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "alpha_absurd");
  EditConfig(dir, [](nlohmann::json& j) { j["lora_alpha"] = 1e6; });  // scale 250000
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "LoRA scale of 250000");
  EditConfig(dir, [](nlohmann::json& j) { j["lora_alpha"] = 4 * kMaxLoraScale; });
  EXPECT_TRUE(Load(dir).ok());
  EditConfig(dir, [](nlohmann::json& j) { j["lora_alpha"] = -4 * kMaxLoraScale - 4; });
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "lora_alpha");
}

TEST(PeftHostile, AnAbsurdAlphaPatternEntryIsNamedByItsKey) {
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "alpha_pattern");
  EditConfig(dir, [](nlohmann::json& j) { j["alpha_pattern"] = {{"v_proj", 1e39}}; });
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "alpha_pattern['v_proj']");
}

TEST(PeftHostile, AConfigNestedDeeperThanTheBoundIsRefusedBeforeParsing) {
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "nested_json");
  ASSERT_TRUE(WriteStringToFile(dir + "/adapter_config.json",
                                "{\"peft_type\": " + std::string(200000, '[') +
                                    std::string(200000, ']') + "}")
                  .ok());
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "nested 200001 deep");
}

TEST(PeftHostile, AnUnsupportedValueIsDescribedNotDumped) {
  const std::string dir = WriteTestPeft(TinyLoraBase(), Spec(), "peft_type");
  EditConfig(dir, [](nlohmann::json& j) { j["peft_type"] = std::string(50000, 'P'); });
  ExpectRefusal(Load(dir), absl::StatusCode::kFailedPrecondition, "(50000 bytes)");
}

// Peak resident memory of this process so far (VmHWM), in bytes.
int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

TEST(PeftHostile, TensorsOfTheWrongShapeAreRefusedBeforeAnyStorageIsAllocated) {
  // A config claiming rank 256 on every projection of a 2048-wide, 16-layer base with a
  // 4-byte tensor for each: the loader used to allocate the adapter's 323 MB of BF16
  // storage before it checked a single shape.
  LlamaConfig base = TinyLoraBase();
  base.hidden = 2048;
  base.intermediate = 5632;
  base.n_layers = 16;
  base.n_heads = 16;
  base.n_kv_heads = 16;
  base.head_dim = 128;
  const std::string dir = FreshDir("wide");
  std::vector<SafetensorsEntry> entries;
  for (int l = 0; l < base.n_layers; ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const std::string stem = "base_model.model." + PeftModulePath(l, t);
      entries.push_back({stem + ".lora_A.weight", "F32", {1}, std::string(4, '\0')});
      entries.push_back({stem + ".lora_B.weight", "F32", {1}, std::string(4, '\0')});
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/adapter_model.safetensors", entries, {}).ok());
  ASSERT_TRUE(WriteStringToFile(dir + "/adapter_config.json",
                                R"({"r": 256, "lora_alpha": 256, "target_modules": "all-linear"})")
                  .ok());
  const int64_t before = PeakRssBytes();
  ASSERT_GT(before, 0);
  const absl::Status s = LoadPeftAdapter(dir, base, AdapterLimits{}).status();
  ExpectRefusal(s, absl::StatusCode::kInvalidArgument, "expected shape [256, 2048]");
  EXPECT_LT(PeakRssBytes() - before, int64_t{64} << 20);
}

class PeftRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = FreshDir("root");
    outside_ = FreshDir("outside");
    limits_.files.roots = {root_};
    // A complete, valid adapter outside the roots: without the check it loads READY.
    auto ad = MakeSyntheticAdapter(TinyLoraBase(), Spec());
    ASSERT_TRUE(ad.ok());
    ASSERT_TRUE(WritePeftAdapter(*ad, outside_ + "/valid").ok());
    ASSERT_TRUE(WritePeftAdapter(*ad, root_ + "/adapter").ok());
    dir_ = root_ + "/adapter";
  }
  std::string root_, outside_, dir_;
  AdapterLimits limits_;
};

TEST_F(PeftRootsTest, AnAdapterInsideTheRootsLoads) { EXPECT_TRUE(Load(dir_, limits_).ok()); }

TEST_F(PeftRootsTest, ASymlinkedSafetensorsOutsideTheRootsIsPermissionDenied) {
  const std::string st = dir_ + "/adapter_model.safetensors";
  ASSERT_EQ(::unlink(st.c_str()), 0);
  ASSERT_EQ(::symlink((outside_ + "/valid/adapter_model.safetensors").c_str(), st.c_str()), 0);
  const absl::Status s = Load(dir_, limits_);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr(outside_)));
}

TEST_F(PeftRootsTest, ASymlinkedConfigOutsideTheRootsNeverEchoesItsBytes) {
  const std::string secret = outside_ + "/secret";
  ASSERT_TRUE(WriteStringToFile(secret, "SECRET-BYTES-OUTSIDE-THE-ROOTS").ok());
  const std::string cfg = dir_ + "/adapter_config.json";
  ASSERT_EQ(::unlink(cfg.c_str()), 0);
  ASSERT_EQ(::symlink(secret.c_str(), cfg.c_str()), 0);
  const absl::Status s = Load(dir_, limits_);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("SECRET")));
}

TEST_F(PeftRootsTest, AFileOverTheSizeLimitIsRefusedBeforeParsing) {
  limits_.files.max_bytes = 64;
  const absl::Status s = Load(dir_, limits_);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("64 byte limit"));
}

TEST_F(PeftRootsTest, AFifoInPlaceOfTheWeightsNeverBlocksTheLoader) {
  const std::string st = dir_ + "/adapter_model.safetensors";
  ASSERT_EQ(::unlink(st.c_str()), 0);
  ASSERT_EQ(::mkfifo(st.c_str(), 0644), 0);
  EXPECT_FALSE(Load(dir_, limits_).ok());  // without O_NONBLOCK: waits for a writer forever
}

}  // namespace
}  // namespace loom
