#include "models/weights/safetensors_file.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/weights/safetensors_writer.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

std::string WriteBytes(const std::string& bytes) {
  const char* d = std::getenv("TEST_TMPDIR");
  const std::string p = absl::StrCat(d ? d : "/tmp", "/t.safetensors");
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), bytes.size());
  return p;
}

// A file from a raw JSON header and `data_bytes` zero bytes of data.
std::string Raw(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(&out[0], &n, 8);
  return out + header + std::string(data_bytes, '\0');
}

std::string Floats(std::initializer_list<float> xs) {
  std::string s;
  for (float x : xs) s.append(reinterpret_cast<const char*>(&x), 4);
  return s;
}

absl::Status OpenStatus(const std::string& bytes) {
  return SafetensorsFile::Open(WriteBytes(bytes)).status();
}

void ExpectInvalid(const std::string& bytes, const std::string& text) {
  const absl::Status s = OpenStatus(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
  EXPECT_THAT(std::string(s.message()), HasSubstr("t.safetensors"));
}

TEST(Safetensors, WriterRoundTrip) {
  const uint16_t bf[3] = {0x3F80, 0xC000, 0x0000};  // 1, -2, 0 in bfloat16
  std::vector<SafetensorsEntry> entries = {
      {"a", "F32", {2, 2}, Floats({1, 2, 3, 4})},
      {"b", "BF16", {3}, std::string(reinterpret_cast<const char*>(bf), 6)},
      {"c", "I64", {1}, std::string(8, '\x01')},
      {"empty", "F32", {0, 4}, ""},
  };
  std::string bytes;
  ASSERT_TRUE(SerializeSafetensors(entries, {{"format", "pt"}}, &bytes).ok());
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);  // data starts 8-byte aligned
  auto f = SafetensorsFile::Open(WriteBytes(bytes));
  ASSERT_TRUE(f.ok()) << f.status();
  const auto& ts = (*f)->tensors();
  ASSERT_EQ(ts.size(), 4u);
  EXPECT_EQ(ts.at("a").dtype, DType::kF32);
  EXPECT_EQ(ts.at("a").shape, (std::vector<int64_t>{2, 2}));
  float a[4];
  std::memcpy(a, ts.at("a").data, 16);
  EXPECT_EQ(a[3], 4.0f);
  EXPECT_EQ(ts.at("b").dtype, DType::kBF16);
  EXPECT_EQ(Bf16ToFp32(reinterpret_cast<const uint16_t*>(ts.at("b").data)[1]), -2.0f);
  EXPECT_FALSE(ts.at("c").dtype.has_value());
  EXPECT_EQ(ts.at("c").dtype_name, "I64");
  EXPECT_EQ(ts.at("empty").nbytes, 0u);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_FALSE(SerializeSafetensors({{"x", "F32", {3}, Floats({1})}}, {}, &bytes).ok());
}

TEST(SafetensorsHostile, HeaderLength) {
  ExpectInvalid(std::string(5, '\0'), "no header length");
  std::string b = Raw("{}", 0);
  const uint64_t huge = uint64_t{1} << 50;
  std::memcpy(&b[0], &huge, 8);
  ExpectInvalid(b, "runs past the end");
  b = Raw("{}", 0);
  const uint64_t three = 3;
  std::memcpy(&b[0], &three, 8);
  ExpectInvalid(b, "runs past the end");
}

TEST(SafetensorsHostile, HeaderNotJsonObject) {
  ExpectInvalid(Raw("{\"a\": ", 0), "not valid JSON");
  ExpectInvalid(Raw("[1, 2]", 0), "not a JSON object");
  ExpectInvalid(Raw("{\"a\": 5}", 0), "entry is not an object");
  ExpectInvalid(Raw("{\"__metadata__\": {\"k\": 1}}", 0), "__metadata__");
}

TEST(SafetensorsHostile, BadEntries) {
  ExpectInvalid(Raw(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4), "missing dtype");
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), "missing shape");
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "shape": [1]}})", 4), "data_offsets");
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})", 4),
                "data_offsets");
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
                "shape entries");
  ExpectInvalid(
      Raw(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
          4),
      "overflows");
  const absl::Status s =
      OpenStatus(Raw(R"({"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}})", 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("'a'"));
}

TEST(SafetensorsHostile, DataOffsets) {
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4),
                "outside the 4 data bytes");
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8),
                "outside");
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
                "needs 12");
  ExpectInvalid(Raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                    12),
                "overlap");
}

}  // namespace
}  // namespace loom
