// GlobMatch against a plain reference: a dynamic program over (pattern, text) prefixes,
// which decides glob matching by definition, on every pattern and text over a small
// alphabet up to length 6; plus the shapes tenants write and adversarial sizes.
#include "server/tenants/glob.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

bool Reference(const std::string& p, const std::string& t) {
  std::vector<std::vector<bool>> m(p.size() + 1, std::vector<bool>(t.size() + 1, false));
  m[0][0] = true;
  for (size_t i = 1; i <= p.size(); ++i) {
    for (size_t j = 0; j <= t.size(); ++j) {
      if (p[i - 1] == '*') {
        m[i][j] = m[i - 1][j] || (j > 0 && m[i][j - 1]);
      } else {
        m[i][j] = j > 0 && m[i - 1][j - 1] && p[i - 1] == t[j - 1];
      }
    }
  }
  return m[p.size()][t.size()];
}

// Every string over `alphabet` of length <= n.
std::vector<std::string> All(const std::string& alphabet, int n) {
  std::vector<std::string> out = {""};
  for (size_t start = 0; start < out.size(); ++start) {
    if (static_cast<int>(out[start].size()) == n) continue;
    for (char c : alphabet) out.push_back(out[start] + c);
  }
  return out;
}

TEST(GlobTest, AgreesWithTheDefinitionOnEverySmallCase) {
  const std::vector<std::string> patterns = All("ab*", 5);
  const std::vector<std::string> texts = All("ab", 6);
  int matches = 0;
  for (const std::string& p : patterns) {
    for (const std::string& t : texts) {
      ASSERT_EQ(GlobMatch(p, t), Reference(p, t)) << "pattern '" << p << "' text '" << t << "'";
      matches += Reference(p, t);
    }
  }
  EXPECT_GT(matches, 1000);  // the grid holds both outcomes in number
}

TEST(GlobTest, TenantShapes) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("*", "anything at all"));
  EXPECT_TRUE(GlobMatch("acme-*", "acme-chat"));
  EXPECT_TRUE(GlobMatch("acme-*", "acme-"));
  EXPECT_FALSE(GlobMatch("acme-*", "acme"));
  EXPECT_FALSE(GlobMatch("acme-*", "other-acme-chat"));
  EXPECT_TRUE(GlobMatch("*-v2", "summarizer-v2"));
  EXPECT_TRUE(GlobMatch("team-*-prod-*", "team-nlp-prod-7"));
  EXPECT_FALSE(GlobMatch("team-*-prod-*", "team-nlp-dev-7"));
  EXPECT_TRUE(GlobMatch("exact", "exact"));
  EXPECT_FALSE(GlobMatch("exact", "exactly"));
  EXPECT_FALSE(GlobMatch("ab*ba", "aba"));  // the head and tail may not overlap
}

TEST(GlobTest, AdversarialInputsStayCorrect) {
  // Shapes that make backtracking matchers exponential or quadratic.
  const std::string text(100000, 'a');
  EXPECT_FALSE(GlobMatch("*a*a*a*a*a*a*a*a*a*a*b", text));
  EXPECT_TRUE(GlobMatch("*a*a*a*a*a*a*a*a*a*a*", text));
  EXPECT_FALSE(GlobMatch(std::string(5000, 'a') + "b*", text));
  EXPECT_TRUE(GlobMatch("*" + std::string(5000, 'a') + "*", text));
}

}  // namespace
}  // namespace loom
