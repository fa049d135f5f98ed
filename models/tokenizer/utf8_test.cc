#include "models/tokenizer/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace loom::utf8 {
namespace {

TEST(Utf8Test, ScanCharClassifies) {
  size_t len = 0;
  uint32_t cp = 0;
  EXPECT_EQ(ScanChar("A", &len, &cp), Scan::kValid);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(cp, 0x41u);
  EXPECT_EQ(ScanChar("\xE4\xBD\xA0", &len, &cp), Scan::kValid);  // U+4F60
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(cp, 0x4F60u);
  EXPECT_EQ(ScanChar("\xF0\x9F\x98\x80", &len, &cp), Scan::kValid);  // U+1F600
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(ScanChar("\xF0\x9F", &len), Scan::kIncomplete);
  EXPECT_EQ(len, 2u);
  EXPECT_EQ(ScanChar("\x80", &len), Scan::kInvalid);          // lone continuation
  EXPECT_EQ(ScanChar("\xC0\xAF", &len), Scan::kInvalid);      // overlong
  EXPECT_EQ(ScanChar("\xED\xA0\x80", &len), Scan::kInvalid);  // surrogate U+D800
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(ScanChar("\xF4\x90\x80\x80", &len), Scan::kInvalid);  // > U+10FFFF
  EXPECT_EQ(ScanChar("\xE4\xBDZ", &len), Scan::kInvalid);          // truncated by 'Z'
  EXPECT_EQ(len, 2u);
}

TEST(Utf8Test, AppendCodepointRoundTrips) {
  for (uint32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFDu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendCodepoint(cp, &s);
    size_t len = 0;
    uint32_t back = 0;
    ASSERT_EQ(ScanChar(s, &len, &back), Scan::kValid) << cp;
    EXPECT_EQ(len, s.size());
    EXPECT_EQ(back, cp);
  }
}

TEST(Utf8Test, SanitizeReplacesMaximalSubparts) {
  const std::string r(kReplacement);
  EXPECT_EQ(Sanitize("ok \xE4\xBD\xA0"), "ok \xE4\xBD\xA0");
  EXPECT_EQ(Sanitize("a\xFF" "b"), "a" + r + "b");
  EXPECT_EQ(Sanitize("a\xE4\xBD" "b"), "a" + r + "b");  // one U+FFFD for the 2-byte prefix
  EXPECT_EQ(Sanitize("\xE4\xBD"), r);                   // truncated at the end
  EXPECT_EQ(Sanitize("\x80\x80"), r + r);
  EXPECT_TRUE(IsValid(Sanitize("\xC0\xAF\xED\xA0\x80\xF5")));
  EXPECT_FALSE(IsValid("\xC0\xAF"));
}

}  // namespace
}  // namespace loom::utf8
