// Admission over keys parsed from JSON, with an injected clock for the token buckets:
// authentication, adapter patterns, streams per tenant, the token rate and its retry
// delay, key reloads, and the keys file's refusals.
#include "server/tenants/admission.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/status_mapping.h"
#include "server/tenants/api_keys.h"

namespace loom {
namespace {

constexpr char kKeys[] = R"({"tenants": {
  "acme": {"keys": ["sk-acme-0001", "sk-acme-0002"], "adapters": ["acme-*", "shared"],
           "tokens_per_minute": 60},
  "ops":  {"keys": ["sk-ops-00001"]}}})";

ApiKeys Keys(const std::string& json = kKeys) {
  absl::StatusOr<ApiKeys> k = ApiKeys::Parse(json);
  EXPECT_TRUE(k.ok()) << k.status();
  return *std::move(k);
}

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionOptions Options(int max_streams = 0) {
    AdmissionOptions o;
    o.max_streams_per_tenant = max_streams;
    o.now = [this] { return now_; };
    return o;
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
  ServerMetrics metrics_;
};

TEST_F(AdmissionTest, WithoutKeysEveryRequestIsAnonymous) {
  Admission a(Options(), &metrics_);
  EXPECT_FALSE(a.keys_required());
  absl::StatusOr<AdmissionTicket> t = a.Admit("", "any-adapter", 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tenant(), kAnonymousTenant);
  EXPECT_TRUE(a.Admit("Bearer whatever", "", 1).ok());
}

TEST_F(AdmissionTest, KeysAuthenticateAndPatternsGateAdapters) {
  Admission a(Options(), &metrics_);
  a.SetKeys(Keys());
  EXPECT_EQ(a.Admit("", "", 1).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.Admit("Bearer sk-wrong-key", "", 1).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.Admit("sk-acme-0001", "", 1).status().code(),  // no "Bearer "
            absl::StatusCode::kUnauthenticated);
  absl::StatusOr<AdmissionTicket> t = a.Admit("Bearer sk-acme-0002", "acme-chat", 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tenant(), "acme");
  EXPECT_TRUE(a.Admit("Bearer sk-acme-0001", "", 1).ok());        // the base model
  EXPECT_TRUE(a.Admit("Bearer sk-acme-0001", "shared", 1).ok());  // an exact pattern
  absl::StatusOr<AdmissionTicket> other = a.Admit("Bearer sk-acme-0001", "globex-chat", 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(other.status().message().find("globex-chat"), std::string::npos);
  EXPECT_TRUE(a.Admit("Bearer sk-ops-00001", "globex-chat", 1).ok());  // no patterns: all
  const std::string exposition = metrics_.Render();
  EXPECT_NE(exposition.find(
                R"(loom_tenant_requests_total{code="PERMISSION_DENIED",tenant="acme"} 1)"),
            std::string::npos)
      << exposition;
  EXPECT_NE(exposition.find(
                R"(loom_tenant_requests_total{code="UNAUTHENTICATED",tenant="unauthenticated"} 3)"),
            std::string::npos);
}

TEST_F(AdmissionTest, TokenRateRefusesWithARetryDelayUntilRefilled) {
  Admission a(Options(), &metrics_);
  a.SetKeys(Keys());
  absl::StatusOr<AdmissionTicket> t = a.Admit("Bearer sk-acme-0001", "", 1);
  ASSERT_TRUE(t.ok());
  t->Finish(absl::StatusCode::kOk, 30, 40);  // 70 tokens out of a bucket of 60: -10
  absl::StatusOr<AdmissionTicket> over = a.Admit("Bearer sk-acme-0002", "", 1);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(RetryAfter(over.status()).has_value());
  EXPECT_EQ(*RetryAfter(over.status()), absl::Seconds(11));  // back to +1 at 1 token/s
  EXPECT_TRUE(a.Admit("Bearer sk-ops-00001", "", 1).ok());   // other tenants unaffected
  now_ += absl::Seconds(10);
  EXPECT_EQ(a.Admit("Bearer sk-acme-0001", "", 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  now_ += absl::Seconds(1);
  EXPECT_TRUE(a.Admit("Bearer sk-acme-0001", "", 1).ok());
  const std::string exposition = metrics_.Render();
  EXPECT_NE(exposition.find(R"(loom_tenant_prompt_tokens_total{tenant="acme"} 30)"),
            std::string::npos)
      << exposition;
  EXPECT_NE(exposition.find(R"(loom_tenant_generation_tokens_total{tenant="acme"} 40)"),
            std::string::npos);
}

TEST_F(AdmissionTest, StreamsPerTenantAreBounded) {
  Admission a(Options(/*max_streams=*/3), &metrics_);
  absl::StatusOr<AdmissionTicket> two = a.Admit("", "", 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(a.Admit("", "", 2).status().code(), absl::StatusCode::kResourceExhausted);
  absl::StatusOr<AdmissionTicket> one = a.Admit("", "", 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(a.Admit("", "", 1).status().code(), absl::StatusCode::kResourceExhausted);
  *two = AdmissionTicket();  // released
  EXPECT_TRUE(a.Admit("", "", 2).ok());
}

TEST_F(AdmissionTest, ReloadReplacesKeysAndABadFileKeepsThem) {
  Admission a(Options(), &metrics_);
  a.SetKeys(Keys());
  absl::StatusOr<AdmissionTicket> t = a.Admit("Bearer sk-acme-0001", "", 1);
  ASSERT_TRUE(t.ok());
  t->Finish(absl::StatusCode::kOk, 100, 0);  // bucket: -40
  a.SetKeys(Keys(R"({"tenants": {"acme": {"keys": ["sk-acme-new1"], "tokens_per_minute": 60}}})"));
  EXPECT_EQ(a.Admit("Bearer sk-acme-0001", "", 1).status().code(),
            absl::StatusCode::kUnauthenticated);
  // The tenant's bucket survived the reload under its name.
  EXPECT_EQ(a.Admit("Bearer sk-acme-new1", "", 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  const std::string path = absl::StrCat(::testing::TempDir(), "/bad_keys.json");
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"tenants\": {\"x\": {\"keys\": [\"short\"]}}}", f);
  std::fclose(f);
  absl::Status s = a.LoadKeys(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tenant 'x'"), std::string::npos) << s;
  EXPECT_EQ(a.LoadKeys(path + ".missing").code(), absl::StatusCode::kNotFound);
  now_ += absl::Minutes(1);
  EXPECT_TRUE(a.Admit("Bearer sk-acme-new1", "", 1).ok());  // the old keys still hold
}

TEST(ApiKeysTest, MalformedFilesAreRefusedByTenantAndField) {
  auto refused = [](const std::string& json, const std::string& in_message) {
    absl::StatusOr<ApiKeys> k = ApiKeys::Parse(json);
    ASSERT_FALSE(k.ok()) << json;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find(in_message), std::string::npos) << k.status();
  };
  refused("[]", "not a JSON object");
  refused("{\"keys\": {}}", "expected {\"tenants\"");
  refused(R"({"tenants": {"bad name": {"keys": ["12345678"]}}})", "tenant name");
  refused(R"({"tenants": {"a": {"keys": []}}})", "non-empty");
  refused(R"({"tenants": {"a": {"adapters": ["x"]}}})", "\"keys\" is required");
  refused(R"({"tenants": {"a": {"keys": ["12345678"], "tokens_per_minute": -1}}})",
          "tokens_per_minute");
  refused(R"({"tenants": {"a": {"keys": ["12345678"], "colour": 1}}})", "unknown field");
  refused(R"({"tenants": {"a": {"keys": ["12345678"]}, "b": {"keys": ["12345678"]}}})",
          "used twice");
  refused(std::string(30, '[') + std::string(30, ']'), "nested too deeply");
  absl::StatusOr<ApiKeys> ok = ApiKeys::Parse(kKeys);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->key_count(), 3u);
  EXPECT_EQ(ok->Find("sk-ops-00001")->name, "ops");
  EXPECT_EQ(ok->Find("sk-nope"), nullptr);
}

}  // namespace
}  // namespace loom
