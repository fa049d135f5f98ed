// GgufFile under files built to exhaust memory or flood messages: what a parse may hold
// per file byte, the caps on keys and tensors, and the length of echoed names.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/weights/gguf_file.h"
#include "models/weights/gguf_writer.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

std::string WriteBytes(const std::string& bytes, const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  const std::string p = absl::StrCat(d ? d : "/tmp", "/", name);
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), bytes.size());
  return p;
}

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// A GGUF v3 header with `n_kv` keys and no tensors; the caller appends the keys.
std::string Header(uint64_t n_kv) {
  std::string b;
  Put<uint32_t>(&b, 0x46554747);
  Put<uint32_t>(&b, 3);
  Put<uint64_t>(&b, 0);  // tensors
  Put<uint64_t>(&b, n_kv);
  return b;
}

void PutKey(std::string* b, const std::string& key) {
  Put<uint64_t>(b, key.size());
  b->append(key);
}

// Anonymous resident memory of this process (heap, not the file mapping), in bytes.
int64_t RssAnonBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssAnon:", 0) != 0) continue;
    int64_t kb = 0;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits += c;
    }
    if (absl::SimpleAtoi(digits, &kb)) return kb * 1024;
  }
  return -1;
}

TEST(GgufBounds, A20MiBArrayCostsNoMemoryPerElement) {
  // One u8 array of 20M elements: before arrays became views, each element was a ~96-byte
  // GgufValue (+1.9 GB for this file).
  constexpr uint64_t kElements = uint64_t{20} << 20;
  std::string b = Header(1);
  PutKey(&b, "hostile.array");
  Put<int32_t>(&b, static_cast<int32_t>(GgufType::kArray));
  Put<int32_t>(&b, static_cast<int32_t>(GgufType::kU8));
  Put<uint64_t>(&b, kElements);
  b.append(kElements, '\x07');
  const std::string path = WriteBytes(b, "huge_array.gguf");
  b.clear();
  b.shrink_to_fit();
  const int64_t before = RssAnonBytes();
  ASSERT_GT(before, 0);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const int64_t grown = RssAnonBytes() - before;
  EXPECT_LT(grown, int64_t{16} << 20) << "parsing a 20 MiB array allocated " << grown
                                      << " bytes";
  const GgufValue* v = (*f)->Find("hostile.array");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), kElements);
  EXPECT_EQ(v->array_bytes.size(), kElements);
  EXPECT_EQ(static_cast<uint8_t>(v->array_bytes[kElements - 1]), 7);
}

TEST(GgufBounds, AStringArrayIsAViewAndDecodesOnDemand) {
  std::string b = Header(1);
  PutKey(&b, "strings");
  Put<int32_t>(&b, static_cast<int32_t>(GgufType::kArray));
  Put<int32_t>(&b, static_cast<int32_t>(GgufType::kString));
  Put<uint64_t>(&b, 3);
  for (const char* s : {"a", "", "xyz"}) PutKey(&b, s);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(WriteBytes(b, "strs.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->Find("strings")->items.empty());
  EXPECT_THAT(*(*f)->GetStringArray("strings"), ::testing::ElementsAre("a", "", "xyz"));
}

TEST(GgufBounds, ABadElementInsideAnArrayIsStillFoundAtParse) {
  std::string b = Header(1);
  PutKey(&b, "bools");
  Put<int32_t>(&b, static_cast<int32_t>(GgufType::kArray));
  Put<int32_t>(&b, static_cast<int32_t>(GgufType::kBool));
  Put<uint64_t>(&b, 3);
  b += std::string("\x01\x00\x02", 3);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(WriteBytes(b, "bools.gguf"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("bool value 2"));
}

TEST(GgufBounds, MoreMetadataKeysThanTheCapAreRefusedBeforeParsing) {
  // 1.2M one-byte keys fit the file's bytes, but each parsed key costs ~250 bytes.
  constexpr uint64_t kKeys = 1200000;
  std::string b = Header(kKeys);
  for (uint64_t k = 0; k < kKeys; ++k) {
    PutKey(&b, "");
    Put<int32_t>(&b, static_cast<int32_t>(GgufType::kU8));
    b.push_back('\0');
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(WriteBytes(b, "keys.gguf"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()),
              HasSubstr(absl::StrCat("metadata count ", kKeys, " is above the limit")));
}

TEST(GgufBounds, A60kCharacterTensorNameIsEchoedBounded) {
  GgufWriter w;
  const std::string name(60000, 'n');
  ASSERT_TRUE(w.AddTensor(name, DType::kF32, {3}, std::string(12, '\0')).ok());
  std::string b = w.Serialize();
  // Make the tensor's type unsupported so that the parse fails naming the tensor.
  const size_t type_at = b.find(name) + name.size() + 4 + 8;
  std::memcpy(&b[type_at], "\x0e\x00\x00\x00", 4);  // Q6_K
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(WriteBytes(b, "name.gguf"));
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("(60000 bytes)"));
  EXPECT_LT(f.status().message().size(), 1000u);
}

}  // namespace
}  // namespace loom
