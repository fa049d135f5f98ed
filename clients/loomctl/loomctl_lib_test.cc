#include "clients/loomctl/loomctl_lib.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"

namespace loom::loomctl {
namespace {

absl::StatusOr<Args> Parse(std::vector<std::string> v) { return ParseArgs(v); }

TEST(ParseArgs, LoadWithFlagsAnywhere) {
  auto a = Parse({"--addr", "10.0.0.1:9", "load", "tenant-a", "/adapters/a", "--pin",
                  "--json", "--token-file=/tmp/t"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, Command::kLoad);
  EXPECT_EQ(a->addr, "10.0.0.1:9");
  EXPECT_EQ(a->id, "tenant-a");
  EXPECT_EQ(a->source, "/adapters/a");
  EXPECT_TRUE(a->pin);
  EXPECT_TRUE(a->json);
  EXPECT_EQ(a->token_file, "/tmp/t");
}

TEST(ParseArgs, DefaultsAndSimpleCommands) {
  auto a = Parse({"list"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->command, Command::kList);
  EXPECT_EQ(a->addr, "127.0.0.1:50052");
  EXPECT_FALSE(a->json);
  auto s = Parse({"status", "--timeout", "2.5"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->command, Command::kStatus);
  EXPECT_EQ(s->timeout, absl::Milliseconds(2500));
  auto u = Parse({"unload", "x"});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->command, Command::kUnload);
  EXPECT_EQ(u->id, "x");
  EXPECT_EQ(Parse({"--help"})->command, Command::kHelp);
}

TEST(ParseArgs, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {},                              // no command
      {"frobnicate"},                  // unknown command
      {"load", "only-id"},             // missing PATH
      {"load", "a", "b", "c"},         // extra operand
      {"unload"},                      // missing ID
      {"list", "extra"},               // extra operand
      {"list", "--bogus"},             // unknown flag
      {"list", "--addr"},              // missing value
      {"list", "--json=yes"},          // boolean flag with a value
      {"unload", "x", "--pin"},        // --pin only for load
      {"status", "--timeout", "-1"},   // bad timeout
      {"load", "", "/p"},              // empty id
  };
  for (const auto& v : bad) {
    auto a = Parse(v);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument)
        << "argv: " << absl::StrJoin(v, " ");
  }
}

TEST(Format, Bytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 20), "3.0 MiB");
  EXPECT_EQ(FormatBytes(uint64_t{5} << 30), "5.0 GiB");
}

TEST(Format, Age) {
  const absl::Time now = absl::FromUnixSeconds(1'000'000);
  google::protobuf::Timestamp t;
  EXPECT_EQ(FormatAge(t, now), "-");
  t.set_seconds(1'000'000 - 5);
  EXPECT_EQ(FormatAge(t, now), "5s ago");
  t.set_seconds(1'000'000 - 125);
  EXPECT_EQ(FormatAge(t, now), "2m ago");
  t.set_seconds(1'000'000 - 7200);
  EXPECT_EQ(FormatAge(t, now), "2h ago");
  t.set_seconds(1'000'000 - 3 * 86400);
  EXPECT_EQ(FormatAge(t, now), "3d ago");
}

// Every line's columns start at the same offsets, and no line ends in a space.
TEST(Format, TableIsAligned) {
  std::string t = RenderTable({"ID", "STATE", "N"}, {{"a-long-id", "READY", "1"}, {"b", "X", "22"}});
  std::vector<std::string> lines = absl::StrSplit(t, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "ID         STATE  N");
  EXPECT_EQ(lines[1], "a-long-id  READY  1");
  EXPECT_EQ(lines[2], "b          X      22");
}

v1::AdapterInfo SampleAdapter() {
  v1::AdapterInfo a;
  a.set_id("tenant-7");
  a.set_source("/srv/adapters/t7");
  a.set_state(v1::ADAPTER_STATE_READY);
  a.set_rank(16);
  a.add_targets("q_proj");
  a.add_targets("v_proj");
  a.set_bytes(2 * 1024 * 1024);
  a.set_pinned(true);
  a.set_resident(true);
  a.set_active_requests(3);
  a.set_requests_served(42);
  a.mutable_last_use()->set_seconds(1'700'000'000);
  return a;
}

TEST(Format, AdapterTableAndJson) {
  v1::ListAdaptersResponse list;
  *list.add_adapters() = SampleAdapter();
  v1::AdapterInfo* failed = list.add_adapters();
  failed->set_id("bad");
  failed->set_state(v1::ADAPTER_STATE_FAILED);
  failed->set_error("adapter_config.json: missing r");
  std::string table = FormatAdapterTable(list, absl::FromUnixSeconds(1'700'000'010));
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].find("ID"), 0u);
  // Column positions agree between header and rows.
  EXPECT_EQ(lines[0].find("STATE"), lines[1].find("READY"));
  EXPECT_EQ(lines[0].find("STATE"), lines[2].find("FAILED"));
  EXPECT_NE(lines[1].find("q_proj,v_proj"), std::string::npos);
  EXPECT_NE(lines[1].find("2.0 MiB"), std::string::npos);
  EXPECT_NE(lines[1].find("10s ago"), std::string::npos);
  EXPECT_EQ(lines[3], "bad: adapter_config.json: missing r");
  EXPECT_EQ(FormatAdapterTable(v1::ListAdaptersResponse(), absl::Now()), "no adapters\n");

  nlohmann::json j = AdapterToJson(SampleAdapter());
  EXPECT_EQ(j["id"], "tenant-7");
  EXPECT_EQ(j["state"], "READY");
  EXPECT_EQ(j["rank"], 16);
  EXPECT_EQ(j["bytes"], 2 * 1024 * 1024);
  EXPECT_EQ(j["targets"], nlohmann::json::array({"q_proj", "v_proj"}));
  EXPECT_EQ(j["last_use"], "2023-11-14T22:13:20+00:00");
  EXPECT_TRUE(AdapterToJson(*failed)["last_use"].is_null());
}

TEST(Format, StatusText) {
  v1::GetStatusResponse s;
  s.set_serving(true);
  s.set_base_model("SmolLM2-135M-Instruct");
  s.set_running(2);
  s.set_queued(1);
  s.set_kv_pages_used(25);
  s.set_kv_pages_free(75);
  auto* w = s.add_workers();
  w->set_id("cpu-0");
  w->set_backend("cpu");
  std::string text = FormatStatus(s);
  EXPECT_NE(text.find("2 running, 1 queued"), std::string::npos) << text;
  EXPECT_NE(text.find("25 used, 75 free (25.0% used)"), std::string::npos) << text;
  EXPECT_NE(text.find("cpu-0"), std::string::npos);
  EXPECT_EQ(StatusToJson(s)["workers"][0]["backend"], "cpu");
  EXPECT_EQ(StatusToJson(s)["kv_pages_free"], 75);
}

// Run() against an in-process Admin server: results on stdout, errors as one line.
class FakeAdmin final : public v1::Admin::Service {
 public:
  grpc::Status ListAdapters(grpc::ServerContext*, const v1::ListAdaptersRequest*,
                            v1::ListAdaptersResponse* r) override {
    *r->add_adapters() = SampleAdapter();
    return grpc::Status::OK;
  }
  grpc::Status UnloadAdapter(grpc::ServerContext*, const v1::UnloadAdapterRequest* req,
                             v1::UnloadAdapterResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no adapter '" + req->id() + "'");
  }
};

TEST(RunCommand, OutputsAndErrors) {
  FakeAdmin admin;
  grpc::ServerBuilder builder;
  builder.RegisterService(&admin);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto client = LoomClient::FromChannel(server->InProcessChannel(grpc::ChannelArguments()), {});

  std::ostringstream out, err;
  auto list = Parse({"list", "--json"});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(loomctl::Run(*list, *client, out, err), 0);
  nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["adapters"][0]["id"], "tenant-7");
  EXPECT_EQ(err.str(), "");

  std::ostringstream out2, err2;
  auto unload = Parse({"unload", "ghost"});
  ASSERT_TRUE(unload.ok());
  EXPECT_EQ(loomctl::Run(*unload, *client, out2, err2), 1);
  EXPECT_EQ(err2.str(), "loomctl: NOT_FOUND: no adapter 'ghost'\n");
  EXPECT_EQ(out2.str(), "");

  std::ostringstream out3, err3;
  auto status = Parse({"status"});
  EXPECT_EQ(loomctl::Run(*status, *client, out3, err3), 1);  // not implemented by the fake
  EXPECT_EQ(err3.str().rfind("loomctl: UNIMPLEMENTED: ", 0), 0u) << err3.str();
  server->Shutdown();
}

// drain / undrain: parsed, sent as DrainWorker with the bearer token, and printed.
class FakeRouterAdmin final : public v1::Admin::Service {
 public:
  grpc::Status DrainWorker(grpc::ServerContext* ctx, const v1::DrainWorkerRequest* req,
                           v1::DrainWorkerResponse* resp) override {
    auto it = ctx->client_metadata().find("authorization");
    if (it == ctx->client_metadata().end() ||
        std::string(it->second.data(), it->second.size()) != "Bearer s3cret") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token");
    }
    if (req->worker() != "10.0.0.7:50061") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no worker named '" + req->worker() + "'");
    }
    last_undrain = req->undrain();
    resp->set_moving_requests(req->undrain() ? 0 : 3);
    return grpc::Status::OK;
  }
  bool last_undrain = true;
};

TEST(ParseArgs, DrainTakesOneWorker) {
  auto a = Parse({"drain", "10.0.0.7:50061"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, Command::kDrain);
  EXPECT_EQ(a->id, "10.0.0.7:50061");
  auto u = Parse({"undrain", "w"});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->command, Command::kUndrain);
  EXPECT_FALSE(Parse({"drain"}).ok());
  EXPECT_FALSE(Parse({"drain", "a", "b"}).ok());
  EXPECT_FALSE(Parse({"drain", "a", "--pin"}).ok());
}

TEST(RunCommand, DrainSendsTheRpcWithToken) {
  FakeRouterAdmin admin;
  grpc::ServerBuilder builder;
  builder.RegisterService(&admin);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto client = LoomClient::FromChannel(server->InProcessChannel(grpc::ChannelArguments()), {});
  setenv("LOOM_ADMIN_TOKEN", "s3cret", 1);

  std::ostringstream out, err;
  auto drain = Parse({"drain", "10.0.0.7:50061"});
  ASSERT_TRUE(drain.ok());
  EXPECT_EQ(loomctl::Run(*drain, *client, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "draining 10.0.0.7:50061: 3 request(s) moving to other workers\n");
  EXPECT_FALSE(admin.last_undrain);

  std::ostringstream out2, err2;
  auto undrain = Parse({"undrain", "10.0.0.7:50061", "--json"});
  ASSERT_TRUE(undrain.ok());
  EXPECT_EQ(loomctl::Run(*undrain, *client, out2, err2), 0) << err2.str();
  EXPECT_TRUE(admin.last_undrain);
  EXPECT_EQ(nlohmann::json::parse(out2.str())["draining"], false);

  std::ostringstream out3, err3;
  auto ghost = Parse({"drain", "ghost:1"});
  EXPECT_EQ(loomctl::Run(*ghost, *client, out3, err3), 1);
  EXPECT_EQ(err3.str(), "loomctl: NOT_FOUND: no worker named 'ghost:1'\n");

  unsetenv("LOOM_ADMIN_TOKEN");
  std::ostringstream out4, err4;
  EXPECT_EQ(loomctl::Run(*drain, *client, out4, err4), 1);
  EXPECT_EQ(err4.str().rfind("loomctl: UNAUTHENTICATED", 0), 0u) << err4.str();
  server->Shutdown();
}

TEST(FormatStatus, RouterColumns) {
  v1::GetStatusResponse s;
  s.set_role("router");
  s.set_failovers(4);
  s.set_migrations(2);
  s.add_idle_workers("b:2");
  v1::WorkerStatus* a = s.add_workers();
  a->set_id("a:1");
  a->set_up(false);
  v1::WorkerStatus* b = s.add_workers();
  b->set_id("b:2");
  b->set_up(true);
  b->set_idle(true);
  const std::string text = FormatStatus(s);
  EXPECT_NE(text.find("STATE"), std::string::npos) << text;
  EXPECT_NE(text.find("down"), std::string::npos) << text;
  EXPECT_NE(text.find("idle"), std::string::npos) << text;
  EXPECT_NE(text.find("2 migrations, 4 failovers; idle workers: b:2"), std::string::npos) << text;
  EXPECT_EQ(StatusToJson(s)["failovers"], 4);
  EXPECT_EQ(StatusToJson(s)["workers"][0]["up"], false);
}

}  // namespace
}  // namespace loom::loomctl
