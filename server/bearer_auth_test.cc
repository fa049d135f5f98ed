#include "server/bearer_auth.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(BearerAuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cres"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "t3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cret "));
}

TEST(BearerAuthTest, NoTokenAllowsEverything) {
  BearerAuth a;
  EXPECT_FALSE(a.required());
  EXPECT_TRUE(a.Check("").ok());
  EXPECT_TRUE(a.Check("Bearer whatever").ok());
}

TEST(BearerAuthTest, TokenMustMatch) {
  BearerAuth a("tok-123");
  EXPECT_TRUE(a.required());
  EXPECT_TRUE(a.Check("Bearer tok-123").ok());
  EXPECT_TRUE(a.Check("bearer tok-123").ok());
  for (const char* bad : {"", "tok-123", "Bearer tok-12", "Bearer tok-1234", "Basic tok-123",
                          "Bearer  tok-123"}) {
    absl::Status s = a.Check(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(s.message().find("tok-123"), std::string::npos);
  }
}

TEST(BearerAuthTest, FromFileStripsWhitespace) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  std::ofstream(dir + "/tok") << "  abc\n";
  std::ofstream(dir + "/empty") << "\n";
  auto a = BearerAuth::FromFile(dir + "/tok");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->Check("Bearer abc").ok());
  EXPECT_EQ(BearerAuth::FromFile(dir + "/empty").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BearerAuth::FromFile(dir + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace loom
