#include "models/weights/gguf_reader.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "models/testing/test_model.h"
#include "models/weights/gguf_file.h"
#include "models/weights/gguf_writer.h"
#include "models/weights/tiny_llama_gguf.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return absl::StrCat(d ? d : "/tmp", "/", name);
}

std::string WriteBytes(const std::string& bytes, const std::string& name = "t.gguf") {
  const std::string p = TempPath(name);
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), bytes.size());
  return p;
}

absl::Status ReadStatus(const std::string& bytes) {
  return ReadGgufModel(WriteBytes(bytes)).status();
}

template <typename T>
void Patch(std::string* b, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), b->size());
  std::memcpy(&(*b)[at], &v, sizeof(T));
}

// Offset of the n_dims field of tensor `name`'s info (the bytes after its name string).
size_t TensorInfoAt(const std::string& b, const std::string& name) {
  std::string needle(8, '\0');
  const uint64_t n = name.size();
  std::memcpy(&needle[0], &n, 8);
  needle += name;
  const size_t at = b.find(needle);
  EXPECT_NE(at, std::string::npos) << name;
  return at + needle.size();
}

// Offset of the value-type field of metadata `key`.
size_t KeyAt(const std::string& b, const std::string& key) { return TensorInfoAt(b, key); }

std::string Tiny(TinyLlamaOptions o = {}) { return BuildTinyLlamaGguf(o).Serialize(); }

void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& text) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
  EXPECT_THAT(std::string(s.message()), HasSubstr("t.gguf"));
}

TEST(GgufReader, TinyModelRoundTrip) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                   DType::kQ4_1}) {
    TinyLlamaOptions o;
    o.matrix_dtype = dt;
    o.tied = dt != DType::kQ4_0;
    auto src = ReadGgufModel(WriteBytes(Tiny(o)));
    ASSERT_TRUE(src.ok()) << src.status();
    const LlamaConfig want = TinyLlamaConfig(o);
    const LlamaConfig& c = (*src)->config();
    EXPECT_EQ(c.vocab_size, want.vocab_size);
    EXPECT_EQ(c.hidden, want.hidden);
    EXPECT_EQ(c.intermediate, want.intermediate);
    EXPECT_EQ(c.n_layers, want.n_layers);
    EXPECT_EQ(c.n_heads, want.n_heads);
    EXPECT_EQ(c.n_kv_heads, want.n_kv_heads);
    EXPECT_EQ(c.head_dim, want.head_dim);
    EXPECT_EQ(c.max_context, 256);
    EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
    EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
    EXPECT_EQ(c.tied_embeddings, o.tied);
    EXPECT_EQ(c.rope_layout, RopeLayout::kAdjacentPairs);
    EXPECT_EQ(c.name, "tiny");
    const size_t n_tensors = 2 + (o.tied ? 0 : 1) + 9 * o.n_layers;
    ASSERT_EQ((*src)->tensors().size(), n_tensors);
    for (const auto& [name, t] : (*src)->tensors()) {
      EXPECT_EQ(t.name, name);
      const DType want_dt = t.shape.size() == 1 ? DType::kF32 : dt;
      EXPECT_EQ(t.dtype, want_dt) << name;
      const std::string want_bytes = TinyTensorBytes(name, want_dt, t.shape, o.seed);
      ASSERT_EQ(t.nbytes, want_bytes.size()) << name;
      EXPECT_EQ(std::memcmp(t.data, want_bytes.data(), t.nbytes), 0) << name;
    }
    auto q = (*src)->Tensor("blk.1.attn_q.weight");
    ASSERT_TRUE(q.ok());
    EXPECT_EQ((*q)->shape, (std::vector<int64_t>{64, 64}));
    EXPECT_EQ((*q)->rows(), 64);
    EXPECT_EQ((*q)->cols(), 64);
    auto k = (*src)->Tensor("blk.1.attn_k.weight");
    EXPECT_EQ((*k)->shape, (std::vector<int64_t>{32, 64}));
    auto down = (*src)->Tensor("blk.0.ffn_down.weight");
    EXPECT_EQ((*down)->shape, (std::vector<int64_t>{64, 96}));
    EXPECT_EQ((*src)->Tensor("nope").status().code(), absl::StatusCode::kNotFound);
  }
}

TEST(GgufReader, TinyVocabulary) {
  auto src = ReadGgufModel(WriteBytes(Tiny()));
  ASSERT_TRUE(src.ok()) << src.status();
  const Vocabulary& v = (*src)->vocabulary();
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "smollm");
  ASSERT_EQ(v.tokens.size(), 40u);
  EXPECT_EQ(v.tokens[1], "<|im_start|>");
  EXPECT_EQ(v.tokens[39], "t39");
  EXPECT_EQ(v.token_types[2], TokenType::kControl);
  EXPECT_EQ(v.token_types[3], TokenType::kNormal);
  EXPECT_EQ(v.merges, (std::vector<std::string>{"t 3", "t 4"}));
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.unk_id, -1);
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(v.chat_template, "tmpl");
}

TEST(GgufReader, Version2File) {
  TinyLlamaOptions o;
  o.version = 2;
  o.matrix_dtype = DType::kQ8_0;
  auto f = GgufFile::Open(WriteBytes(Tiny(o)));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
  auto src = ReadGgufModel(WriteBytes(Tiny(o)));
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->config().hidden, 64);
}

TEST(GgufFile, AllValueTypesAndNestedArrays) {
  GgufWriter w;
  auto scalar = [](GgufType t, int64_t i, double f = 0) {
    GgufValue v;
    v.type = t;
    v.i = i;
    v.f = f;
    return v;
  };
  w.AddValue("u8", scalar(GgufType::kU8, 200));
  w.AddValue("i8", scalar(GgufType::kI8, -100));
  w.AddValue("u16", scalar(GgufType::kU16, 60000));
  w.AddValue("i16", scalar(GgufType::kI16, -30000));
  w.AddU32("u32", 4000000000u);
  w.AddI32("i32", -2000000000);
  w.AddU64("u64", 1ull << 40);
  w.AddU64("u64big", ~0ull);
  w.AddValue("i64", scalar(GgufType::kI64, -(int64_t{1} << 50)));
  w.AddF32("f32", 0.5f);
  w.AddValue("f64", scalar(GgufType::kF64, 0, 1e300));
  w.AddBool("bool", true);
  w.AddString("str", "hello");
  w.AddF32Array("f32arr", {1.5f, -2.0f});
  GgufValue nested;
  nested.type = GgufType::kArray;
  nested.elem_type = GgufType::kArray;
  for (int k = 0; k < 3; ++k) {
    GgufValue inner;
    inner.type = GgufType::kArray;
    inner.elem_type = GgufType::kU16;
    for (int j = 0; j <= k; ++j) inner.items.push_back(scalar(GgufType::kU16, 10 * k + j));
    nested.items.push_back(inner);
  }
  w.AddValue("nested", nested);
  auto f = GgufFile::Open(WriteBytes(w.Serialize()));
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.GetInt("u8"), 200);
  EXPECT_EQ(*g.GetInt("i8"), -100);
  EXPECT_EQ(*g.GetInt("u16"), 60000);
  EXPECT_EQ(*g.GetInt("i16"), -30000);
  EXPECT_EQ(*g.GetInt("u32"), 4000000000ll);
  EXPECT_EQ(*g.GetInt("i32"), -2000000000);
  EXPECT_EQ(*g.GetInt("u64"), int64_t{1} << 40);
  EXPECT_EQ(g.GetInt("u64big").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetInt32("u32").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*g.GetInt("i64"), -(int64_t{1} << 50));
  EXPECT_EQ(*g.GetFloat("f32"), 0.5);
  EXPECT_EQ(*g.GetFloat("f64"), 1e300);
  EXPECT_EQ(*g.GetFloat("u16"), 60000.0);
  EXPECT_TRUE(*g.GetBool("bool"));
  EXPECT_EQ(*g.GetString("str"), "hello");
  EXPECT_EQ(*g.GetFloatArray("f32arr"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(g.GetString("u8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetBool("str").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetString("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(g.GetStringArray("f32arr").status().code(), absl::StatusCode::kInvalidArgument);
  const GgufValue* n = g.Find("nested");
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->items.empty());  // a view of the file's bytes until decoded
  absl::StatusOr<std::vector<GgufValue>> outer = DecodeGgufArray(*n);
  ASSERT_TRUE(outer.ok()) << outer.status();
  ASSERT_EQ(outer->size(), 3u);
  EXPECT_EQ((*outer)[2].elem_type, GgufType::kU16);
  absl::StatusOr<std::vector<GgufValue>> inner = DecodeGgufArray((*outer)[2]);
  ASSERT_TRUE(inner.ok()) << inner.status();
  ASSERT_EQ(inner->size(), 3u);
  EXPECT_EQ((*inner)[1].i, 21);
  EXPECT_TRUE(g.tensor_infos().empty());
}

// ---- Hostile input: each mutation must give a Status naming the file, never a crash.

TEST(GgufHostile, BadMagic) {
  std::string b = Tiny();
  b[0] = 'X';
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "not a GGUF file");
}

TEST(GgufHostile, UnsupportedVersion) {
  for (uint32_t v : {1u, 4u, 0xFFFFFFFFu}) {
    std::string b = Tiny();
    Patch<uint32_t>(&b, 4, v);
    ExpectError(ReadStatus(b), absl::StatusCode::kUnimplemented, "unsupported GGUF version");
  }
}

TEST(GgufHostile, EveryTruncationOfTheHeaderFails) {
  const std::string b = Tiny();
  auto f = GgufFile::Open(WriteBytes(b));
  ASSERT_TRUE(f.ok());
  const size_t data_start = (*f)->data_offset();
  for (size_t n = 0; n < data_start + 64; ++n) {
    const absl::Status s = ReadStatus(b.substr(0, n));
    ASSERT_FALSE(s.ok()) << "cut at " << n;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  // Cut inside the last tensor's data.
  ExpectError(ReadStatus(b.substr(0, b.size() - 100)), absl::StatusCode::kInvalidArgument,
              "runs past the end of the file");
}

TEST(GgufHostile, StringLengthPastEnd) {
  std::string b = Tiny();
  Patch<uint64_t>(&b, 24, uint64_t{1} << 40);  // the first key's length
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "runs past the end");
  b = Tiny();
  const size_t at = KeyAt(b, "general.name");  // value type i32, then string length
  Patch<uint64_t>(&b, at + 4, b.size());
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "runs past the end");
}

TEST(GgufHostile, AbsurdCounts) {
  std::string b = Tiny();
  Patch<uint64_t>(&b, 8, uint64_t{1} << 60);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "tensor count");
  b = Tiny();
  Patch<uint64_t>(&b, 16, ~uint64_t{0});
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "metadata count");
  b = Tiny();
  const size_t at = KeyAt(b, "tokenizer.ggml.tokens");  // type, elem type, count
  Patch<uint64_t>(&b, at + 8, uint64_t{1} << 40);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "array count");
}

TEST(GgufHostile, UnknownValueTypes) {
  std::string b = Tiny();
  Patch<int32_t>(&b, KeyAt(b, "general.name"), 13);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "unknown value type 13");
  b = Tiny();
  Patch<int32_t>(&b, KeyAt(b, "tokenizer.ggml.tokens") + 4, -1);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument,
              "unknown array element type -1");
}

TEST(GgufHostile, BadDims) {
  const std::string name = "blk.0.attn_q.weight";
  std::string b = Tiny();
  Patch<uint32_t>(&b, TensorInfoAt(b, name), 5);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "n_dims 5");
  b = Tiny();
  Patch<uint32_t>(&b, TensorInfoAt(b, name), 0);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "n_dims 0");
  b = Tiny();
  Patch<int64_t>(&b, TensorInfoAt(b, name) + 4, 0);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "ne[0] = 0");
  b = Tiny();
  Patch<int64_t>(&b, TensorInfoAt(b, name) + 12, -64);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "ne[1] = -64");
  b = Tiny();
  Patch<int64_t>(&b, TensorInfoAt(b, name) + 4, int64_t{1} << 30);
  Patch<int64_t>(&b, TensorInfoAt(b, name) + 12, int64_t{1} << 30);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "element count overflows");
}

TEST(GgufHostile, UnsupportedTensorTypes) {
  for (int32_t type : {14, 99, -3}) {
    std::string b = Tiny();
    const size_t at = TensorInfoAt(b, "blk.1.ffn_up.weight");
    Patch<int32_t>(&b, at + 4 + 16, type);
    const absl::Status s = ReadStatus(b);
    ExpectError(s, absl::StatusCode::kUnimplemented, "blk.1.ffn_up.weight");
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("ggml type ", type)));
  }
}

TEST(GgufHostile, QuantizedRowNotMultipleOfBlock) {
  TinyLlamaOptions o;
  o.matrix_dtype = DType::kQ8_0;
  std::string b = Tiny(o);
  const size_t at = TensorInfoAt(b, "blk.0.attn_v.weight");
  Patch<int64_t>(&b, at + 4, 48);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "not a multiple");
}

TEST(GgufHostile, TensorOffsets) {
  const std::string name = "blk.1.ffn_down.weight";  // the last tensor
  std::string b = Tiny();
  Patch<uint64_t>(&b, TensorInfoAt(b, name) + 4 + 16 + 4, uint64_t{1} << 62);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "runs past the end");
  b = Tiny();
  Patch<uint64_t>(&b, TensorInfoAt(b, name) + 4 + 16 + 4, ~uint64_t{0} - 31);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "runs past the end");
  b = Tiny();
  const size_t off_at = TensorInfoAt(b, name) + 4 + 16 + 4;
  uint64_t off;
  std::memcpy(&off, &b[off_at], 8);
  Patch<uint64_t>(&b, off_at, off + 4);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "not a multiple of the alignment");
  b = Tiny();
  Patch<uint64_t>(&b, TensorInfoAt(b, "blk.0.attn_q.weight") + 4 + 16 + 4, 0);
  ExpectError(ReadStatus(b), absl::StatusCode::kInvalidArgument, "overlap");
}

TEST(GgufHostile, DuplicateNamesAndKeys) {
  GgufWriter w = BuildTinyLlamaGguf({});
  ASSERT_TRUE(w.AddF32Tensor("output_norm.weight", {64}, std::vector<float>(64)).ok());
  ExpectError(ReadStatus(w.Serialize()), absl::StatusCode::kInvalidArgument,
              "duplicate tensor name 'output_norm.weight'");
  GgufWriter w2 = BuildTinyLlamaGguf({});
  w2.AddString("general.name", "again");
  ExpectError(ReadStatus(w2.Serialize()), absl::StatusCode::kInvalidArgument,
              "duplicate metadata key 'general.name'");
}

TEST(GgufHostile, AlignmentNotPowerOfTwo) {
  for (uint32_t a : {0u, 24u, 3u}) {
    GgufWriter w = BuildTinyLlamaGguf({});
    w.AddU32("general.alignment", a);
    ExpectError(ReadStatus(w.Serialize()), absl::StatusCode::kInvalidArgument,
                "general.alignment");
  }
  GgufWriter ok = BuildTinyLlamaGguf({});
  ok.SetAlignment(64);
  auto f = GgufFile::Open(WriteBytes(ok.Serialize()));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
}

TEST(GgufHostile, MissingKeysAndTensors) {
  for (const char* key : {"general.architecture", "llama.embedding_length",
                          "llama.block_count", "llama.attention.head_count",
                          "llama.attention.layer_norm_rms_epsilon", "tokenizer.ggml.model",
                          "tokenizer.ggml.tokens"}) {
    TinyLlamaOptions o;
    o.omit = {key};
    const absl::Status s = ReadStatus(Tiny(o));
    EXPECT_FALSE(s.ok()) << key;
    EXPECT_THAT(std::string(s.message()), HasSubstr(key));
  }
  for (const char* t : {"token_embd.weight", "output_norm.weight", "blk.1.ffn_up.weight",
                        "blk.0.attn_norm.weight"}) {
    TinyLlamaOptions o;
    o.omit = {t};
    ExpectError(ReadStatus(Tiny(o)), absl::StatusCode::kInvalidArgument,
                absl::StrCat("missing required tensor '", t, "'"));
  }
}

TEST(GgufHostile, WrongArchitecture) {
  TinyLlamaOptions o;
  o.omit = {"general.architecture"};
  GgufWriter w = BuildTinyLlamaGguf(o);
  w.AddString("general.architecture", "gpt2");
  ExpectError(ReadStatus(w.Serialize()), absl::StatusCode::kUnimplemented, "'gpt2'");
}

TEST(GgufHostile, ShapesInconsistentWithConfig) {
  const std::map<std::string, std::vector<int64_t>> bad = {
      {"token_embd.weight", {39, 64}},       {"output_norm.weight", {32}},
      {"blk.0.attn_norm.weight", {96}},      {"blk.0.attn_q.weight", {32, 64}},
      {"blk.0.attn_k.weight", {64, 64}},     {"blk.0.attn_v.weight", {32, 32}},
      {"blk.1.attn_output.weight", {64, 32}}, {"blk.1.ffn_norm.weight", {64, 64}},
      {"blk.1.ffn_gate.weight", {64, 64}},   {"blk.1.ffn_up.weight", {96, 96}},
      {"blk.1.ffn_down.weight", {96, 64}},
  };
  for (const auto& [name, shape] : bad) {
    TinyLlamaOptions o;
    o.reshape[name] = shape;
    ExpectError(ReadStatus(Tiny(o)), absl::StatusCode::kInvalidArgument,
                absl::StrCat("tensor '", name, "' has shape"));
  }
  TinyLlamaOptions o;
  o.tied = false;
  o.reshape["output.weight"] = {40, 32};
  ExpectError(ReadStatus(Tiny(o)), absl::StatusCode::kInvalidArgument,
              "tensor 'output.weight' has shape [40, 32], but the config implies [40, 64]");
}

TEST(GgufHostile, VocabSizeMismatch) {
  TinyLlamaOptions o;
  o.omit = {"llama.vocab_size"};
  GgufWriter w = BuildTinyLlamaGguf(o);
  w.AddU32("llama.vocab_size", 41);
  ExpectError(ReadStatus(w.Serialize()), absl::StatusCode::kInvalidArgument,
              "llama.vocab_size 41 does not match the 40 tokens");
}

TEST(GgufHostile, BadTokenMetadata) {
  TinyLlamaOptions o;
  o.omit = {"tokenizer.ggml.bos_token_id"};
  GgufWriter w = BuildTinyLlamaGguf(o);
  w.AddU32("tokenizer.ggml.bos_token_id", 40);
  ExpectError(ReadStatus(w.Serialize()), absl::StatusCode::kInvalidArgument,
              "bos_token_id = 40 is outside the vocabulary");
  o.omit = {"tokenizer.ggml.token_type"};
  GgufWriter w2 = BuildTinyLlamaGguf(o);
  w2.AddI32Array("tokenizer.ggml.token_type", {1, 1});
  ExpectError(ReadStatus(w2.Serialize()), absl::StatusCode::kInvalidArgument,
              "token_type has 2 entries");
}

TEST(GgufHostile, BadConfigNumbers) {
  TinyLlamaOptions o;
  o.n_kv_heads = 3;  // 4 heads are not a multiple of 3
  o.reshape["blk.0.attn_k.weight"] = {48, 64};
  ExpectError(ReadStatus(Tiny(o)), absl::StatusCode::kInvalidArgument, "n_kv_heads");
}

TEST(GgufHostile, RandomHeaderMutationsNeverCrash) {
  const std::string good = Tiny();
  auto f = GgufFile::Open(WriteBytes(good));
  ASSERT_TRUE(f.ok());
  const size_t header = (*f)->data_offset();
  uint32_t rng = 12345;
  auto next = [&] { return rng = rng * 1664525u + 1013904223u; };
  int failures = 0;
  for (int k = 0; k < 1500; ++k) {
    std::string b = good;
    const int edits = 1 + next() % 3;
    for (int e = 0; e < edits; ++e) {
      const size_t at = next() % header;
      b[at] = static_cast<char>(next() >> 24);
      if (next() % 4 == 0 && at + 8 <= b.size()) {  // sometimes a huge 64-bit value
        const uint64_t big = (uint64_t{next()} << 32) | next();
        std::memcpy(&b[at], &big, 8);
      }
    }
    const absl::Status s = ReadStatus(b);  // must return, OK or not
    failures += !s.ok();
  }
  EXPECT_GT(failures, 0);
}

// ---- The real SmolLM2-135M-Instruct Q4_1 file.

TEST(GgufRealModel, ConfigVocabularyAndTensors) {
  auto src = ReadGgufModel(testing::DefaultModelPath());
  ASSERT_TRUE(src.ok()) << src.status();
  const LlamaConfig& c = (*src)->config();
  EXPECT_EQ(c.hidden, 576);
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.n_heads, 9);
  EXPECT_EQ(c.n_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_context, 8192);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_layout, RopeLayout::kAdjacentPairs);

  const auto& ts = (*src)->tensors();
  ASSERT_EQ(ts.size(), 272u);
  std::map<DType, int> counts;
  for (const auto& [name, t] : ts) counts[t.dtype]++;
  EXPECT_EQ(counts[DType::kQ4_1], 210);
  EXPECT_EQ(counts[DType::kF32], 61);
  EXPECT_EQ(counts[DType::kQ8_0], 1);
  EXPECT_EQ(ts.at("token_embd.weight").dtype, DType::kQ8_0);
  EXPECT_EQ(ts.at("token_embd.weight").shape, (std::vector<int64_t>{49152, 576}));
  EXPECT_EQ(ts.at("blk.7.ffn_down.weight").shape, (std::vector<int64_t>{576, 1536}));
  EXPECT_EQ(ts.at("blk.7.ffn_down.weight").nbytes, 576u * 1536 / 32 * 20);
  EXPECT_EQ(ts.count("output.weight"), 0u);

  const Vocabulary& v = (*src)->vocabulary();
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "smollm");
  EXPECT_EQ(v.tokens.size(), 49152u);
  EXPECT_EQ(v.merges.size(), 48900u);
  EXPECT_EQ(v.tokens[0], "<|endoftext|>");
  EXPECT_EQ(v.tokens[198], "\xC4\x8A");  // "Ċ", GPT-2's byte-to-unicode for '\n'
  EXPECT_EQ(v.token_types[16], TokenType::kControl);
  EXPECT_EQ(v.token_types[17], TokenType::kNormal);
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.pad_id, 2);
  EXPECT_FALSE(v.add_bos);
  EXPECT_THAT(v.chat_template, HasSubstr("<|im_start|>"));
}

// Reference rows from gguf-py 0.19 (python3):
//   r = gguf.GGUFReader(path); t = {x.name: x for x in r.tensors}[NAME]
//   d = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1, t.shape[0])
//   x = d[ROW].astype(np.float32); x[:4].tolist(), float(x.astype(np.float64).sum())
struct RowRef {
  const char* name;
  int row;
  float first[4];
  double sum;
};
constexpr RowRef kRowRefs[] = {
    {"blk.0.attn_q.weight", 0, {-0.0963134765625f, 0.1573486328125f, -0.0963134765625f,
                                -0.73046875f}, 1.00726318359375},
    {"token_embd.weight", 1, {-0.0238037109375f, -0.015869140625f, -0.0396728515625f,
                              0.015869140625f}, 0.35922718048095703},
    {"blk.5.ffn_down.weight", 100, {-0.10595703125f, -0.006622314453125f,
                                    -0.006622314453125f, -0.091766357421875f},
     -1.3557662963867188},
    {"blk.29.attn_k.weight", 191, {0.2447509765625f, -0.193603515625f, 0.4395751953125f,
                                   -0.193603515625f}, -2.57061767578125},
    {"blk.0.attn_norm.weight", 0, {0.01397705078125f, 0.0238037109375f, -0.019775390625f,
                                   -0.0302734375f}, 0.6129436492919922},
};

TEST(GgufRealModel, DequantizedRowsMatchGgufPy) {
  auto src = ReadGgufModel(testing::DefaultModelPath());
  ASSERT_TRUE(src.ok()) << src.status();
  for (const RowRef& ref : kRowRefs) {
    auto t = (*src)->Tensor(ref.name);
    ASSERT_TRUE(t.ok()) << t.status();
    const WeightTensor& w = **t;
    ASSERT_LT(ref.row, w.rows());
    std::vector<float> row(w.cols());
    DequantizeRow(w.dtype, w.data + ref.row * w.row_bytes(), row.data(), w.cols());
    double sum = 0;
    for (float x : row) sum += x;
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(row[k], ref.first[k], 1e-6) << ref.name;
    EXPECT_NEAR(sum, ref.sum, 1e-6) << ref.name;
  }
}

}  // namespace
}  // namespace loom
