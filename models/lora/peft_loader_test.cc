#include "models/lora/peft_loader.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "models/lora/adapter_loader.h"
#include "models/lora/lora_test_util.h"
#include "models/lora/peft_writer.h"
#include "models/weights/qk_permutation.h"
#include "models/weights/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using ::loom::testing::FreshDir;
using ::loom::testing::ProjectionIndex;
using ::loom::testing::TinyLoraBase;
using ::loom::testing::WriteTestPeft;
using ::testing::HasSubstr;

std::string F32Bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// The safetensors entries (F32) of a synthetic adapter, for tests that edit them.
std::vector<SafetensorsEntry> Entries(const SyntheticAdapter& ad) {
  std::vector<SafetensorsEntry> e;
  const int r = ad.spec.rank;
  for (const auto& p : ad.projections) {
    const std::string stem = "base_model.model." + PeftModulePath(p.layer, p.target);
    e.push_back({stem + ".lora_A.weight", "F32", {r, p.h_in}, F32Bytes(p.a)});
    e.push_back({stem + ".lora_B.weight", "F32", {p.h_out, r}, F32Bytes(p.b)});
  }
  return e;
}

void WriteEntries(const std::string& dir, const std::vector<SafetensorsEntry>& e) {
  ASSERT_TRUE(WriteSafetensors(dir + "/adapter_model.safetensors", e, {}).ok());
}

void EditConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& fn) {
  std::ifstream in(dir + "/adapter_config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  fn(j);
  ASSERT_TRUE(WriteStringToFile(dir + "/adapter_config.json", j.dump()).ok());
}

// Checks every projection of `got` against the synthetic adapter `want` (BF16-rounded),
// with q/k B rows permuted to GGUF order when `permuted`.
void ExpectWeights(const SyntheticAdapter& want, const LoraAdapter& got, bool permuted) {
  ASSERT_EQ(got.projections().size(), want.projections.size());
  const int r = want.spec.rank;
  for (const auto& p : want.projections) {
    const kernels::LoraPair* pair = got.Pair(p.layer, p.target);
    ASSERT_NE(pair, nullptr) << p.layer << " " << PeftModuleName(p.target);
    ASSERT_EQ(pair->rank, r);
    EXPECT_FLOAT_EQ(pair->scale, want.scale);
    for (size_t i = 0; i < p.a.size(); ++i) {
      ASSERT_EQ(pair->a[i], Fp32ToBf16(p.a[i])) << "A elem " << i;
    }
    const bool qk = p.target == LoraTarget::kQ || p.target == LoraTarget::kK;
    for (int64_t row = 0; row < p.h_out; ++row) {
      const int64_t src = (permuted && qk) ? HfRowOfGgufRow(row, want.base.head_dim) : row;
      for (int k = 0; k < r; ++k) {
        ASSERT_EQ(pair->b[row * r + k], Fp32ToBf16(p.b[src * r + k]))
            << PeftModuleName(p.target) << " B row " << row;
      }
    }
  }
}

TEST(PeftLoaderTest, LoadsAllSevenProjectionsInHfLayout) {
  const LlamaConfig base = TinyLoraBase(RopeLayout::kHalves);
  SyntheticAdapterSpec spec;
  spec.rank = 4;
  spec.alpha = 8;
  SyntheticAdapter want;
  const std::string dir = WriteTestPeft(base, spec, "all7", &want);
  auto ad = LoadPeftAdapter(dir, base, AdapterLimits{});
  ASSERT_TRUE(ad.ok()) << ad.status();
  ExpectWeights(want, **ad, /*permuted=*/false);
  EXPECT_EQ((*ad)->targets().size(), 7u);
  EXPECT_EQ((*ad)->max_rank(), 4);
  EXPECT_FLOAT_EQ((*ad)->Pair(0, LoraTarget::kQ)->scale, 2.0f);  // alpha / r
  // BF16: 2 bytes per element; per projection r * (h_in + h_out).
  size_t elems = 0;
  for (LoraTarget t : kAllLoraTargets) {
    const ProjectionShape s = BaseProjectionShape(base, t);
    elems += 4 * (s.h_in + s.h_out);
  }
  EXPECT_EQ((*ad)->bytes(), 2 * base.n_layers * elems);
  // GQA widths: k/v project 64 -> 2 * 16.
  EXPECT_EQ(BaseProjectionShape(base, LoraTarget::kK).h_out, 32);
  EXPECT_EQ((*ad)->Pair(base.n_layers, LoraTarget::kQ), nullptr);
}

TEST(PeftLoaderTest, PermutesQkRowsForGgufBase) {
  const LlamaConfig base = TinyLoraBase(RopeLayout::kAdjacentPairs);
  SyntheticAdapterSpec spec;
  spec.rank = 3;
  SyntheticAdapter want;
  const std::string dir = WriteTestPeft(base, spec, "perm", &want);
  auto ad = LoadPeftAdapter(dir, base, AdapterLimits{});
  ASSERT_TRUE(ad.ok()) << ad.status();
  ExpectWeights(want, **ad, /*permuted=*/true);
  // The permutation really moves rows: GGUF row 1 is HF row d/2 = 8.
  EXPECT_EQ(HfRowOfGgufRow(1, 16), 8);
}

TEST(PeftLoaderTest, HalfPrecisionInputsAndRsLora) {
  const LlamaConfig base = TinyLoraBase(RopeLayout::kHalves);
  for (DType dt : {DType::kF16, DType::kBF16}) {
    SyntheticAdapterSpec spec;
    spec.rank = 4;
    spec.alpha = 6;
    spec.use_rslora = true;
    spec.dtype = dt;
    SyntheticAdapter want;
    const std::string dir = WriteTestPeft(base, spec, "half", &want);
    auto ad = LoadPeftAdapter(dir, base, AdapterLimits{});
    ASSERT_TRUE(ad.ok()) << ad.status();
    ExpectWeights(want, **ad, false);
    EXPECT_FLOAT_EQ((*ad)->Pair(1, LoraTarget::kDown)->scale, 3.0f);  // 6 / sqrt(4)
  }
}

TEST(PeftLoaderTest, TargetSubsetLayersAndRegex) {
  const LlamaConfig base = TinyLoraBase(RopeLayout::kHalves);
  SyntheticAdapterSpec spec;
  spec.rank = 2;
  spec.targets = {LoraTarget::kQ, LoraTarget::kV};
  spec.layers = {1};
  SyntheticAdapter want;
  const std::string dir = WriteTestPeft(base, spec, "subset", &want);
  auto ad = LoadPeftAdapter(dir, base, AdapterLimits{});
  ASSERT_TRUE(ad.ok()) << ad.status();
  ExpectWeights(want, **ad, false);
  EXPECT_EQ((*ad)->Pair(0, LoraTarget::kQ), nullptr);
  EXPECT_EQ((*ad)->Pair(1, LoraTarget::kK), nullptr);
  EXPECT_NE((*ad)->Pair(1, LoraTarget::kV), nullptr);
  EXPECT_EQ((*ad)->targets(), (std::vector<LoraTarget>{LoraTarget::kQ, LoraTarget::kV}));

  // The same selection as a regex string.
  EditConfig(dir, [](nlohmann::json& j) {
    j["target_modules"] = R"(.*\.1\.self_attn\.(q_proj|v_proj))";
    j["layers_to_transform"] = nullptr;
  });
  auto re = LoadPeftAdapter(dir, base, AdapterLimits{});
  ASSERT_TRUE(re.ok()) << re.status();
  ExpectWeights(want, **re, false);
}

TEST(PeftLoaderTest, RankAndAlphaPatterns) {
  const LlamaConfig base = TinyLoraBase(RopeLayout::kHalves);
  // Ranks: q_proj 2 (rank_pattern), layer-1 down_proj 6 (full path), others 4.
  SyntheticAdapterSpec s4, s2, s6;
  s4.rank = 4;
  s4.targets = {LoraTarget::kV, LoraTarget::kDown};
  s2.rank = 2;
  s2.targets = {LoraTarget::kQ};
  s6.rank = 6;
  s6.targets = {LoraTarget::kDown};
  s6.layers = {1};
  auto a4 = MakeSyntheticAdapter(base, s4);
  auto a2 = MakeSyntheticAdapter(base, s2);
  auto a6 = MakeSyntheticAdapter(base, s6);
  ASSERT_TRUE(a4.ok() && a2.ok() && a6.ok());
  std::vector<SafetensorsEntry> e;
  for (auto& x : Entries(*a2)) e.push_back(x);
  for (auto& x : Entries(*a6)) e.push_back(x);
  for (auto& x : Entries(*a4)) {
    if (x.name.find("layers.1.mlp.down_proj") == std::string::npos) e.push_back(x);
  }
  const std::string dir = FreshDir("pattern");
  ASSERT_TRUE(WritePeftAdapter(*a4, dir).ok());
  WriteEntries(dir, e);
  EditConfig(dir, [](nlohmann::json& j) {
    j["r"] = 4;
    j["lora_alpha"] = 16;
    j["target_modules"] = {"q_proj", "v_proj", "down_proj"};
    j["rank_pattern"] = {{"q_proj", 2}, {"model.layers.1.mlp.down_proj", 6}};
    j["alpha_pattern"] = {{"v_proj", 32}};
  });
  auto ad = LoadPeftAdapter(dir, base, AdapterLimits{});
  ASSERT_TRUE(ad.ok()) << ad.status();
  EXPECT_EQ((*ad)->Pair(0, LoraTarget::kQ)->rank, 2);
  EXPECT_FLOAT_EQ((*ad)->Pair(0, LoraTarget::kQ)->scale, 16.0f / 2);
  EXPECT_EQ((*ad)->Pair(0, LoraTarget::kV)->rank, 4);
  EXPECT_FLOAT_EQ((*ad)->Pair(0, LoraTarget::kV)->scale, 32.0f / 4);
  EXPECT_EQ((*ad)->Pair(0, LoraTarget::kDown)->rank, 4);
  EXPECT_EQ((*ad)->Pair(1, LoraTarget::kDown)->rank, 6);
  EXPECT_FLOAT_EQ((*ad)->Pair(1, LoraTarget::kDown)->scale, 16.0f / 6);
  EXPECT_EQ((*ad)->max_rank(), 6);
  const int i = ProjectionIndex(**ad, 1, LoraTarget::kDown);
  ASSERT_GE(i, 0);
  EXPECT_EQ((*ad)->a(i)[5], Fp32ToBf16(a6->projections[0].a[5]));
}

TEST(PeftLoaderTest, FanInFanOutAcceptsTransposedStorage) {
  const LlamaConfig base = TinyLoraBase(RopeLayout::kHalves);
  SyntheticAdapterSpec spec;
  spec.rank = 3;
  spec.targets = {LoraTarget::kO};
  SyntheticAdapter want;
  const std::string dir = WriteTestPeft(base, spec, "fifo", &want);
  std::vector<SafetensorsEntry> e;
  for (const auto& p : want.projections) {
    std::vector<float> at(p.a.size()), bt(p.b.size());
    for (int k = 0; k < 3; ++k) {
      for (int c = 0; c < p.h_in; ++c) at[c * 3 + k] = p.a[k * p.h_in + c];
      for (int o = 0; o < p.h_out; ++o) bt[k * p.h_out + o] = p.b[o * 3 + k];
    }
    const std::string stem = "base_model.model." + PeftModulePath(p.layer, p.target);
    e.push_back({stem + ".lora_A.weight", "F32", {p.h_in, 3}, F32Bytes(at)});
    e.push_back({stem + ".lora_B.weight", "F32", {3, p.h_out}, F32Bytes(bt)});
  }
  WriteEntries(dir, e);
  auto no = LoadPeftAdapter(dir, base, AdapterLimits{});
  EXPECT_EQ(no.status().code(), absl::StatusCode::kInvalidArgument) << no.status();
  EditConfig(dir, [](nlohmann::json& j) { j["fan_in_fan_out"] = true; });
  auto ad = LoadPeftAdapter(dir, base, AdapterLimits{});
  ASSERT_TRUE(ad.ok()) << ad.status();
  ExpectWeights(want, **ad, false);
}

// The writer's magnitude contract: rows of scale * B A have norm ~ relative_magnitude *
// base_row_norm (mean over rows, within 20%).
TEST(PeftWriterTest, UpdateRowNormFollowsRelativeMagnitude) {
  const LlamaConfig base = TinyLoraBase(RopeLayout::kHalves);
  SyntheticAdapterSpec spec;
  spec.rank = 16;
  spec.alpha = 8;
  spec.targets = {LoraTarget::kGate};
  spec.relative_magnitude = 0.1f;
  spec.base_row_norm[LoraTarget::kGate] = 3.0f;
  auto ad = MakeSyntheticAdapter(base, spec);
  ASSERT_TRUE(ad.ok()) << ad.status();
  for (const auto& p : ad->projections) {
    double mean = 0;
    for (int o = 0; o < p.h_out; ++o) {
      double sq = 0;
      for (int c = 0; c < p.h_in; ++c) {
        double v = 0;
        for (int k = 0; k < 16; ++k) v += double(p.b[o * 16 + k]) * p.a[k * p.h_in + c];
        sq += (ad->scale * v) * (ad->scale * v);
      }
      mean += std::sqrt(sq) / p.h_out;
    }
    EXPECT_NEAR(mean, 0.3, 0.06) << "layer " << p.layer;
  }
}

// ---- refusals ----

class PeftRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.rank = 4;
    dir_ = WriteTestPeft(base_, spec_, "refuse", &ad_);
  }
  absl::Status Load(const AdapterLimits& limits = AdapterLimits{}) {
    return LoadPeftAdapter(dir_, base_, limits).status();
  }
  LlamaConfig base_ = TinyLoraBase(RopeLayout::kAdjacentPairs);
  SyntheticAdapterSpec spec_;
  SyntheticAdapter ad_;
  std::string dir_;
};

TEST_F(PeftRefusalTest, MissingFiles) {
  EXPECT_EQ(LoadPeftAdapter(dir_ + "/nope", base_, {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadAdapter(dir_ + "/nope", base_, {}).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_EQ(std::remove((dir_ + "/adapter_config.json").c_str()), 0);
  absl::Status st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(st.message()), HasSubstr("adapter_config.json"));
}

TEST_F(PeftRefusalTest, MissingSafetensorsAndPickle) {
  const std::string st_path = dir_ + "/adapter_model.safetensors";
  ASSERT_EQ(std::rename(st_path.c_str(), (dir_ + "/other").c_str()), 0);
  absl::Status st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  ASSERT_TRUE(WriteStringToFile(dir_ + "/adapter_model.bin", "PK\x03\x04 pickle").ok());
  st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("pickle"));
  st = LoadAdapter(dir_ + "/adapter_model.bin", base_, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
}

TEST_F(PeftRefusalTest, WrongShapeForThisBase) {
  // k_proj B with hidden (64) rows instead of the GQA width 32.
  auto e = Entries(ad_);
  for (auto& x : e) {
    if (x.name == "base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight") {
      x.shape = {64, 4};
      x.bytes = F32Bytes(std::vector<float>(256, 0.01f));
    }
  }
  WriteEntries(dir_, e);
  absl::Status st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("layers.0.self_attn.k_proj.lora_B"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("expected shape [32, 4]"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("got [64, 4]"));
}

TEST_F(PeftRefusalTest, MoreLayersThanTheBase) {
  LlamaConfig one = base_;
  one.n_layers = 1;
  absl::Status st = LoadPeftAdapter(dir_, one, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("layer 1"));
}

TEST_F(PeftRefusalTest, NonFiniteWeights) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    auto e = Entries(ad_);
    std::memcpy(e[5].bytes.data() + 4 * 3, &bad, 4);
    WriteEntries(dir_, e);
    absl::Status st = Load();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(e[5].name));
    EXPECT_THAT(std::string(st.message()), HasSubstr("non-finite"));
  }
}

TEST_F(PeftRefusalTest, RankZeroAndAboveLimit) {
  absl::Status st = Load(AdapterLimits{2});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("limit 2"));
  EXPECT_TRUE(Load(AdapterLimits{4}).ok());
  EditConfig(dir_, [](nlohmann::json& j) { j["r"] = 0; });
  st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("rank 0"));
}

TEST_F(PeftRefusalTest, RankDisagreesWithConfig) {
  EditConfig(dir_, [](nlohmann::json& j) { j["r"] = 8; });
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PeftRefusalTest, UnknownTargetModule) {
  EditConfig(dir_, [](nlohmann::json& j) { j["target_modules"].push_back("rotary_emb"); });
  absl::Status st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("unknown target module 'rotary_emb'"));
}

TEST_F(PeftRefusalTest, TruncatedTensors) {
  const std::string path = dir_ + "/adapter_model.safetensors";
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  ASSERT_TRUE(WriteStringToFile(path, bytes.substr(0, bytes.size() - 100)).ok());
  absl::Status st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("adapter_model.safetensors"));
}

TEST_F(PeftRefusalTest, UnsupportedPeftFeaturesByName) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    const char* name;
  };
  const Case cases[] = {
      {[](nlohmann::json& j) { j["use_dora"] = true; }, "DoRA"},
      {[](nlohmann::json& j) { j["modules_to_save"] = {"lm_head"}; }, "modules_to_save"},
      {[](nlohmann::json& j) { j["bias"] = "lora_only"; }, "bias"},
      {[](nlohmann::json& j) { j["target_modules"].push_back("embed_tokens"); }, "embedding"},
      {[](nlohmann::json& j) { j["target_modules"].push_back("lm_head"); }, "lm_head"},
      {[](nlohmann::json& j) { j["peft_type"] = "IA3"; }, "peft_type"},
  };
  for (const Case& c : cases) {
    dir_ = WriteTestPeft(base_, spec_, "feature", nullptr);
    EditConfig(dir_, c.edit);
    absl::Status st = Load();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << c.name << ": " << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.name));
  }
}

TEST_F(PeftRefusalTest, UnexpectedOrMissingTensors) {
  auto e = Entries(ad_);
  e.push_back({"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector",
               "F32", {64}, F32Bytes(std::vector<float>(64, 1.0f))});
  WriteEntries(dir_, e);
  absl::Status st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("DoRA"));

  e = Entries(ad_);
  e.push_back({"base_model.model.lm_head.lora_A.weight", "F32", {4, 64},
               F32Bytes(std::vector<float>(256, 0.0f))});
  WriteEntries(dir_, e);
  EXPECT_THAT(std::string(Load().message()), HasSubstr("lm_head"));

  e = Entries(ad_);
  e.erase(e.begin() + 1);  // layer 0 q_proj lora_B
  WriteEntries(dir_, e);
  st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("missing tensor"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("q_proj.lora_B"));

  // A module the config does not target.
  WriteEntries(dir_, Entries(ad_));
  EditConfig(dir_, [](nlohmann::json& j) {
    j["target_modules"] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj"};
  });
  st = Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("down_proj"));
}

TEST_F(PeftRefusalTest, BadJson) {
  ASSERT_TRUE(WriteStringToFile(dir_ + "/adapter_config.json", "{\"r\": 4,").ok());
  EXPECT_EQ(Load().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loom
