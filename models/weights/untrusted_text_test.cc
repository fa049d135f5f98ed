#include "models/weights/untrusted_text.h"

#include <string>

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(QuoteUntrusted, ShortPrintableTextIsQuotedAsIs) {
  EXPECT_EQ(QuoteUntrusted("blk.0.attn_q.weight"), "'blk.0.attn_q.weight'");
}

TEST(QuoteUntrusted, LongTextIsCutAndItsLengthSaid) {
  const std::string name(60000, 'a');
  const std::string q = QuoteUntrusted(name);
  EXPECT_EQ(q, "'" + std::string(kMaxEchoedBytes, 'a') + "...' (60000 bytes)");
}

TEST(QuoteUntrusted, ControlBytesQuotesAndInvalidUtf8AreEscaped) {
  const std::string q = QuoteUntrusted(std::string("a\nb'\x01\xff", 6));
  EXPECT_EQ(q, "'a\\nb\\'\\x01\\xff'");
  for (char c : q) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
}

TEST(QuoteUntrusted, WorstCaseLengthIsBounded) {
  const std::string q = QuoteUntrusted(std::string(100000, '\x80'));
  EXPECT_LE(q.size(), 4 * kMaxEchoedBytes + 32);
}

}  // namespace
}  // namespace loom
