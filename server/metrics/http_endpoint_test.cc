#include "server/metrics/http_endpoint.h"

#include <string>

#include "gtest/gtest.h"
#include "httplib.h"

namespace loom {
namespace {

struct Reply {
  int status = -1;  // -1: no reply
  std::string body;
  std::string content_type;
};

Reply Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  Reply r;
  if (auto res = client.Get(path.c_str())) {
    r.status = res->status;
    r.body = res->body;
    r.content_type = res->get_header_value("Content-Type");
  }
  return r;
}

TEST(HttpEndpointTest, HealthIs503UntilReadyThen200) {
  ServerMetrics metrics;
  HttpEndpoint http;
  ASSERT_TRUE(http.Start("127.0.0.1", 0, &metrics).ok());
  ASSERT_GT(http.port(), 0);
  for (const char* path : {"/healthz", "/readyz"}) {
    Reply r = Get(http.port(), path);
    EXPECT_EQ(r.status, 503) << path;
    EXPECT_EQ(r.body, "not ready\n") << path;
  }
  metrics.SetReady(true);
  for (const char* path : {"/healthz", "/readyz"}) {
    Reply r = Get(http.port(), path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body, "ok\n") << path;
  }
  metrics.SetReady(false);  // e.g. draining
  EXPECT_EQ(Get(http.port(), "/healthz").status, 503);
}

TEST(HttpEndpointTest, MetricsServesTheExposition) {
  ServerMetrics metrics;
  HttpEndpoint http;
  ASSERT_TRUE(http.Start("127.0.0.1", 0, &metrics).ok());
  metrics.RecordRequest("alpha", "OK");
  metrics.observer()->OnStep(8, 2, 2, 1, 12, 48);
  Reply r = Get(http.port(), "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.body, metrics.Render());  // nothing changed in between
  EXPECT_NE(r.body.find("loom_requests_total{adapter=\"alpha\",code=\"OK\"} 1\n"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("loom_kv_cache_usage_ratio 0.25\n"), std::string::npos) << r.body;
  EXPECT_EQ(Get(http.port(), "/nope").status, 404);
}

TEST(HttpEndpointTest, SecondBindOfSamePortFailsWithUnavailable) {
  ServerMetrics metrics;
  HttpEndpoint first, second;
  ASSERT_TRUE(first.Start("127.0.0.1", 0, &metrics).ok());
  absl::Status s = second.Start("127.0.0.1", first.port(), &metrics);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(second.port(), 0);
  EXPECT_EQ(Get(first.port(), "/healthz").status, 503);  // the first still serves
}

TEST(HttpEndpointTest, BadArgumentsAndRestart) {
  ServerMetrics metrics;
  HttpEndpoint http;
  EXPECT_EQ(http.Start("127.0.0.1", 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(http.Start("127.0.0.1", 70000, &metrics).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(http.Start("no-such-host.invalid", 0, &metrics).code(),
            absl::StatusCode::kUnavailable);
  ASSERT_TRUE(http.Start("127.0.0.1", 0, &metrics).ok());
  EXPECT_EQ(http.Start("127.0.0.1", 0, &metrics).code(),
            absl::StatusCode::kFailedPrecondition);
  const int port = http.port();
  http.Stop();
  EXPECT_EQ(http.port(), 0);
  EXPECT_EQ(Get(port, "/healthz").status, -1);  // nothing listens any more
  http.Stop();                                  // idempotent
  ASSERT_TRUE(http.Start("127.0.0.1", 0, &metrics).ok());
  metrics.SetReady(true);
  EXPECT_EQ(Get(http.port(), "/healthz").status, 200);
}

}  // namespace
}  // namespace loom
