#include "models/weights/hf_directory_reader.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/weights/hf_tensor_names.h"
#include "models/weights/llama_tensors.h"
#include "models/weights/model_source.h"
#include "models/weights/safetensors_writer.h"
#include "models/weights/tiny_llama_gguf.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// A tiny HF Llama directory written from scratch (no exporter): F32 weights with the same
// deterministic values as the tiny GGUF, a BPE tokenizer.json and tokenizer_config.json.
class TinyHfDir {
 public:
  explicit TinyHfDir(const std::string& name) {
    const char* d = std::getenv("TEST_TMPDIR");
    dir = absl::StrCat(d ? d : "/tmp", "/", name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    config = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},
              {"intermediate_size", 96}, {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
              {"max_position_embeddings", 256}, {"vocab_size", 40},
              {"tie_word_embeddings", true}, {"bos_token_id", 0}, {"eos_token_id", 0}};
    TinyLlamaOptions o;
    for (const ExpectedTensor& e : LlamaTensorList(TinyLlamaConfig(o))) {
      if (e.name == "output.weight") continue;
      entries.push_back({*GgufToHfName(e.name), "F32", e.shape,
                         TinyTensorBytes(e.name, DType::kF32, e.shape, o.seed)});
    }
    json vocab = json::object();
    for (int k = 3; k < 38; ++k) vocab[absl::StrCat("t", k)] = k;  // 38, 39 left as gaps
    json added = json::array();
    added.push_back({{"id", 0}, {"content", "<|endoftext|>"}, {"special", true}});
    added.push_back({{"id", 1}, {"content", "<|im_start|>"}, {"special", true}});
    added.push_back({{"id", 2}, {"content", "<|im_end|>"}, {"special", true}});
    added.push_back({{"id", 37}, {"content", "<user>"}, {"special", false}});
    tokenizer = {
        {"added_tokens", added},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Digits"}, {"individual_digits", true}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}}},
        {"model",
         {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"t 3", json::array({"t", "4"})}}}}};
    tokenizer_config = {{"bos_token", "<|im_start|>"},
                        {"eos_token", {{"content", "<|im_end|>"}}},
                        {"add_bos_token", false},
                        {"chat_template", "tmpl"}};
  }

  // Writes everything; shards > 1 splits the tensors round-robin with an index.
  void Write(int shards = 1) {
    WriteJson("config.json", config);
    WriteJson("tokenizer.json", tokenizer);
    WriteJson("tokenizer_config.json", tokenizer_config);
    if (shards == 1) {
      ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", entries, {}).ok());
      return;
    }
    std::vector<std::vector<SafetensorsEntry>> parts(shards);
    json map = json::object();
    for (size_t k = 0; k < entries.size(); ++k) {
      parts[k % shards].push_back(entries[k]);
      map[entries[k].name] = ShardName(k % shards, shards);
    }
    for (int s = 0; s < shards; ++s) {
      ASSERT_TRUE(WriteSafetensors(dir + "/" + ShardName(s, shards), parts[s], {}).ok());
    }
    index = {{"metadata", json::object()}, {"weight_map", map}};
    WriteJson("model.safetensors.index.json", index);
  }

  static std::string ShardName(int s, int n) {
    return absl::StrCat("model-0000", s + 1, "-of-0000", n, ".safetensors");
  }
  void WriteJson(const std::string& name, const json& j) {
    ASSERT_TRUE(WriteStringToFile(dir + "/" + name, j.dump()).ok());
  }

  std::string dir;
  json config, tokenizer, tokenizer_config, index;
  std::vector<SafetensorsEntry> entries;
};

void ExpectError(const absl::StatusOr<std::unique_ptr<ModelSource>>& r, absl::StatusCode code,
                 const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(text));
}

TEST(HfDirectoryReader, ReadsConfigTensorsAndVocabulary) {
  TinyHfDir d("hf_basic");
  d.Write();
  auto src = ModelSource::Open(d.dir);  // a directory dispatches to the HF reader
  ASSERT_TRUE(src.ok()) << src.status();
  const LlamaConfig& c = (*src)->config();
  const LlamaConfig want = TinyLlamaConfig({});
  EXPECT_EQ(c.hidden, want.hidden);
  EXPECT_EQ(c.intermediate, want.intermediate);
  EXPECT_EQ(c.n_layers, want.n_layers);
  EXPECT_EQ(c.n_heads, want.n_heads);
  EXPECT_EQ(c.n_kv_heads, want.n_kv_heads);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 40);
  EXPECT_EQ(c.max_context, 256);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.rope_layout, RopeLayout::kHalves);
  EXPECT_EQ(c.name, "hf_basic");
  ASSERT_EQ((*src)->tensors().size(), 2u + 9 * 2);
  for (const auto& [name, t] : (*src)->tensors()) {
    const std::string want_bytes = TinyTensorBytes(name, DType::kF32, t.shape, 1);
    ASSERT_EQ(t.nbytes, want_bytes.size()) << name;
    EXPECT_EQ(std::memcmp(t.data, want_bytes.data(), t.nbytes), 0) << name;
  }
  const Vocabulary& v = (*src)->vocabulary();
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "smollm");
  ASSERT_EQ(v.tokens.size(), 40u);
  EXPECT_EQ(v.tokens[1], "<|im_start|>");
  EXPECT_EQ(v.token_types[1], TokenType::kControl);
  EXPECT_EQ(v.tokens[37], "<user>");
  EXPECT_EQ(v.token_types[37], TokenType::kUserDefined);
  EXPECT_EQ(v.tokens[36], "t36");
  EXPECT_EQ(v.token_types[36], TokenType::kNormal);
  EXPECT_EQ(v.tokens[39], "[PAD39]");  // padded up to vocab_size
  EXPECT_EQ(v.token_types[39], TokenType::kUnused);
  EXPECT_EQ(v.merges, (std::vector<std::string>{"t 3", "t 4"}));
  EXPECT_EQ(v.bos_id, 1);  // tokenizer_config wins over config.json's 0
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(v.chat_template, "tmpl");
}

TEST(HfDirectoryReader, ShardedWithIndex) {
  TinyHfDir d("hf_sharded");
  d.Write(3);
  auto src = ReadHfDirectory(d.dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->tensors().size(), 20u);
  EXPECT_EQ((*src)->files_.size(), 3u);
  auto t = (*src)->Tensor("blk.1.ffn_down.weight");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->shape, (std::vector<int64_t>{64, 96}));
}

TEST(HfDirectoryReader, GenerationConfigAndPlainGpt2PreTokenizer) {
  TinyHfDir d("hf_gen");
  d.tokenizer_config = json::object();
  d.tokenizer["pre_tokenizer"] = {{"type", "ByteLevel"}};
  d.config.erase("bos_token_id");
  d.config.erase("eos_token_id");
  d.Write();
  d.WriteJson("generation_config.json", {{"bos_token_id", 1}, {"eos_token_id", {2, 0}}});
  auto src = ReadHfDirectory(d.dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->vocabulary().pre, "gpt2");
  EXPECT_EQ((*src)->vocabulary().bos_id, 1);
  EXPECT_EQ((*src)->vocabulary().eos_id, 2);
}

TEST(HfDirectoryReader, UntiedHasOutput) {
  TinyHfDir d("hf_untied");
  d.config["tie_word_embeddings"] = false;
  d.entries.push_back({"lm_head.weight", "F32", {40, 64},
                       TinyTensorBytes("output.weight", DType::kF32, {40, 64}, 1)});
  d.entries.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {8},
                       std::string(32, '\0')});  // ignored
  d.Write();
  auto src = ReadHfDirectory(d.dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_FALSE((*src)->config().tied_embeddings);
  EXPECT_TRUE((*src)->Tensor("output.weight").ok());
}

TEST(HfDirectoryHostile, ConfigProblems) {
  {
    TinyHfDir d("hf_bad1");
    d.config.erase("hidden_size");
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "missing key 'hidden_size'");
  }
  {
    TinyHfDir d("hf_bad2");
    d.config["architectures"] = {"MistralForCausalLM"};
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kUnimplemented, "LlamaForCausalLM");
  }
  {
    TinyHfDir d("hf_bad3");
    d.config["num_key_value_heads"] = 3;
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument, "n_kv_heads");
  }
  {
    TinyHfDir d("hf_bad4");
    d.Write();
    ASSERT_TRUE(WriteStringToFile(d.dir + "/config.json", "{\"hidden_size\": ").ok());
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument, "not valid JSON");
  }
  {
    TinyHfDir d("hf_bad5");
    d.config["rope_scaling"] = {{"type", "llama3"}};
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kUnimplemented, "rope_scaling");
  }
  ExpectError(ReadHfDirectory("/nonexistent_dir"), absl::StatusCode::kNotFound, "config.json");
}

TEST(HfDirectoryHostile, TensorProblems) {
  {
    TinyHfDir d("hf_t1");
    d.entries.erase(d.entries.begin() + 5);
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "missing required tensor");
  }
  {
    TinyHfDir d("hf_t2");
    for (auto& e : d.entries) {
      if (e.name == "model.layers.1.self_attn.k_proj.weight") {
        e.dtype_name = "I32";  // same byte size, unsupported type
      }
    }
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kUnimplemented,
                "'model.layers.1.self_attn.k_proj.weight' has dtype I32");
  }
  {
    TinyHfDir d("hf_t3");
    for (auto& e : d.entries) {
      if (e.name == "model.layers.0.mlp.up_proj.weight") e.shape = {64, 96};
    }
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "tensor 'blk.0.ffn_up.weight' has shape [64, 96]");
  }
  {
    TinyHfDir d("hf_t4");
    std::filesystem::remove(d.dir + "/model.safetensors");
    d.WriteJson("config.json", d.config);
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kNotFound, "no model.safetensors");
  }
}

TEST(HfDirectoryHostile, ShardProblems) {
  {
    TinyHfDir d("hf_s1");
    d.Write(2);
    std::filesystem::remove(d.dir + "/" + TinyHfDir::ShardName(1, 2));
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kNotFound, "is missing");
  }
  {
    TinyHfDir d("hf_s2");
    d.Write(2);
    // Shard 2 also holds a tensor of shard 1.
    std::vector<SafetensorsEntry> part;
    for (size_t k = 0; k < d.entries.size(); ++k) {
      if (k % 2 == 1 || k == 0) part.push_back(d.entries[k]);
    }
    ASSERT_TRUE(
        WriteSafetensors(d.dir + "/" + TinyHfDir::ShardName(1, 2), part, {}).ok());
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "appears in both");
  }
  {
    TinyHfDir d("hf_s3");
    d.Write(2);
    d.index["weight_map"]["model.norm.weight"] = "../evil.safetensors";
    d.WriteJson("model.safetensors.index.json", d.index);
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "plain file name");
  }
  {
    TinyHfDir d("hf_s4");
    d.Write(2);
    d.index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = TinyHfDir::ShardName(0, 2);
    d.WriteJson("model.safetensors.index.json", d.index);
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "does not contain it");
  }
}

TEST(HfDirectoryHostile, TokenizerProblems) {
  {
    TinyHfDir d("hf_k1");
    d.tokenizer_config["bos_token"] = "<nope>";
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "'bos_token' = '<nope>' is not a token");
  }
  {
    TinyHfDir d("hf_k2");
    d.tokenizer["model"]["vocab"]["t99"] = 99;
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument,
                "the tokenizer has 100 tokens");
  }
  {
    TinyHfDir d("hf_k3");
    d.tokenizer["model"]["type"] = "Unigram";
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kUnimplemented, "Unigram");
  }
  {
    TinyHfDir d("hf_k4");
    d.tokenizer["model"]["merges"] = {"t 3", 7};
    d.Write();
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kInvalidArgument, "merge #1");
  }
  {
    TinyHfDir d("hf_k5");
    d.Write();
    std::filesystem::remove(d.dir + "/tokenizer.json");
    ExpectError(ReadHfDirectory(d.dir), absl::StatusCode::kNotFound, "no tokenizer");
  }
}

TEST(HfTensorNames, BothDirections) {
  EXPECT_EQ(*HfToGgufName("model.layers.12.self_attn.o_proj.weight"),
            "blk.12.attn_output.weight");
  EXPECT_EQ(*HfToGgufName("model.layers.0.post_attention_layernorm.weight"),
            "blk.0.ffn_norm.weight");
  EXPECT_EQ(*HfToGgufName("lm_head.weight"), "output.weight");
  EXPECT_EQ(*GgufToHfName("blk.3.ffn_gate.weight"), "model.layers.3.mlp.gate_proj.weight");
  EXPECT_EQ(*GgufToHfName("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_FALSE(HfToGgufName("model.layers.x.mlp.up_proj.weight").has_value());
  EXPECT_FALSE(HfToGgufName("model.layers.0.self_attn.rotary_emb.inv_freq").has_value());
  for (const ExpectedTensor& e : LlamaTensorList(TinyLlamaConfig({}))) {
    EXPECT_EQ(*HfToGgufName(*GgufToHfName(e.name)), e.name);
  }
}

}  // namespace
}  // namespace loom
