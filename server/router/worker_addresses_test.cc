#include "server/router/worker_addresses.h"

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(ParseWorkerSpec, ListsAndDnsItems) {
  auto items = ParseWorkerSpec("10.0.0.1:50061, dns:///loom-workers.default.svc:7000,[::1]:9");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 3u);
  EXPECT_FALSE((*items)[0].dns);
  EXPECT_EQ((*items)[0].host, "10.0.0.1");
  EXPECT_EQ((*items)[0].port, 50061);
  EXPECT_TRUE((*items)[1].dns);
  EXPECT_EQ((*items)[1].host, "loom-workers.default.svc");
  EXPECT_EQ((*items)[1].port, 7000);
  EXPECT_EQ((*items)[2].host, "::1");
  EXPECT_EQ(JoinHostPort((*items)[2].host, 9), "[::1]:9");
}

TEST(ParseWorkerSpec, RejectsBadItems) {
  EXPECT_FALSE(ParseWorkerSpec("").ok());
  EXPECT_FALSE(ParseWorkerSpec("host").ok());
  EXPECT_FALSE(ParseWorkerSpec("host:0").ok());
  EXPECT_FALSE(ParseWorkerSpec("host:70000").ok());
  EXPECT_FALSE(ParseWorkerSpec(":80").ok());
  EXPECT_FALSE(ParseWorkerSpec("[::1:80").ok());
}

TEST(ResolveWorkers, LiteralsAsGivenAndDnsResolved) {
  auto items = ParseWorkerSpec("127.0.0.1:5,dns:///localhost:6,127.0.0.1:5");
  ASSERT_TRUE(items.ok());
  auto addrs = ResolveWorkers(*items);
  ASSERT_TRUE(addrs.ok()) << addrs.status();
  ASSERT_GE(addrs->size(), 2u);
  EXPECT_EQ((*addrs)[0], "127.0.0.1:5");
  // localhost resolves (from /etc/hosts, no network) to 127.0.0.1 and/or ::1.
  bool found = false;
  for (const std::string& a : *addrs) found |= a == "127.0.0.1:6" || a == "[::1]:6";
  EXPECT_TRUE(found);
  EXPECT_EQ(std::count(addrs->begin(), addrs->end(), "127.0.0.1:5"), 1);
}

TEST(ResolveWorkers, UnresolvableNameAloneIsAnError) {
  auto items = ParseWorkerSpec("dns:///no-such-host.invalid:1");
  ASSERT_TRUE(items.ok());
  EXPECT_EQ(ResolveWorkers(*items).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace loom
