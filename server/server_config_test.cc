#include "server/server_config.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(ServerConfigTest, DefaultsServeLoopbackOnTheDocumentedPorts) {
  ServerOptions o;
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 50051);
  EXPECT_EQ(o.admin_host, "127.0.0.1");
  EXPECT_EQ(o.admin_port, 50052);
  EXPECT_EQ(o.metrics_port, 9400);
  EXPECT_TRUE(o.on_demand_adapters);
  EXPECT_EQ(o.role, ServerRole::kSingle);
  EXPECT_TRUE(o.Validate().ok());
}

TEST(ServerConfigTest, RoleParsesByName) {
  ServerOptions o;
  for (ServerRole r : {ServerRole::kWorker, ServerRole::kRouter, ServerRole::kSingle}) {
    ASSERT_TRUE(ApplySetting("role", ServerRoleName(r), &o).ok());
    EXPECT_EQ(o.role, r);
  }
  ASSERT_TRUE(ApplyConfigJson(R"({"role": "worker"})", &o).ok());
  EXPECT_EQ(o.role, ServerRole::kWorker);
  absl::Status s = ApplySetting("role", "frontend", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("role"), std::string::npos) << s;
  EXPECT_EQ(o.role, ServerRole::kWorker);
}

TEST(ServerConfigTest, SettingsParse) {
  ServerOptions o;
  ASSERT_TRUE(ApplySetting("port", "6000", &o).ok());
  ASSERT_TRUE(ApplySetting("adapter_roots", "/a, /b", &o).ok());
  ASSERT_TRUE(ApplySetting("preload", "x=/a/x,y=rel/y", &o).ok());
  ASSERT_TRUE(ApplySetting("on_demand_adapters", "false", &o).ok());
  ASSERT_TRUE(ApplySetting("shutdown_grace", "2.5s", &o).ok());
  ASSERT_TRUE(ApplySetting("kv_bytes", "1048576", &o).ok());
  ASSERT_TRUE(ApplySetting("policy", "fair", &o).ok());
  EXPECT_EQ(o.port, 6000);
  EXPECT_EQ(o.adapter_roots, (std::vector<std::string>{"/a", "/b"}));
  ASSERT_EQ(o.preload.size(), 2u);
  EXPECT_EQ(o.preload[0].id, "x");
  EXPECT_EQ(o.preload[0].source, "/a/x");
  EXPECT_EQ(o.preload[1].source, "rel/y");
  EXPECT_FALSE(o.on_demand_adapters);
  EXPECT_EQ(o.shutdown_grace, absl::Milliseconds(2500));
  EXPECT_EQ(o.kv_bytes, size_t{1} << 20);
  EXPECT_EQ(o.policy, "fair");
}

TEST(ServerConfigTest, BadValuesNameTheSetting) {
  ServerOptions o;
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"port", "70000"}, {"port", "abc"}, {"max_running", "0"}, {"policy", "lifo"},
           {"preload", "noequals"}, {"shutdown_grace", "-1s"}, {"on_demand_adapters", "maybe"}}) {
    absl::Status s = ApplySetting(k, v, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k << "=" << v;
    EXPECT_NE(s.message().find(k), std::string::npos) << s;
  }
  EXPECT_EQ(ApplySetting("nope", "1", &o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(o.port, 50051);  // failed settings change nothing
}

TEST(ServerConfigTest, JsonKeysMirrorTheFlags) {
  ServerOptions o;
  ASSERT_TRUE(ApplyConfigJson(R"({"port": 7000, "adapter_roots": ["/r1", "/r2"],
                                  "preload": {"a": "a_dir", "b": "b.gguf"},
                                  "on_demand_adapters": false, "model": "/m.gguf",
                                  "shutdown_grace": "5s"})",
                              &o)
                  .ok());
  EXPECT_EQ(o.port, 7000);
  EXPECT_EQ(o.adapter_roots, (std::vector<std::string>{"/r1", "/r2"}));
  ASSERT_EQ(o.preload.size(), 2u);
  EXPECT_EQ(o.preload[1].id, "b");
  EXPECT_EQ(o.preload[1].source, "b.gguf");
  EXPECT_FALSE(o.on_demand_adapters);
  EXPECT_EQ(o.model, "/m.gguf");
  EXPECT_EQ(o.shutdown_grace, absl::Seconds(5));
  // Every JSON key is a setting name, and every setting name is accepted as a key.
  for (const std::string& name : SettingNames()) {
    EXPECT_NE(ApplySetting(name, "", &o).message().find("unknown"), 0u) << name;
  }
}

TEST(ServerConfigTest, BadJson) {
  ServerOptions o;
  EXPECT_EQ(ApplyConfigJson("{", &o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyConfigJson("[1]", &o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyConfigJson(R"({"bogus": 1})", &o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyConfigJson(R"({"port": "x"})", &o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyConfigJson(R"({"port": 1.5})", &o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyConfigFile("/nonexistent/loomd.json", &o).code(),
            absl::StatusCode::kNotFound);
}

TEST(ServerConfigTest, ConfigFileThenFlagsOverride) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/loomd.json";
  std::ofstream(path) << R"({"port": 7001, "max_queued": 3})";
  ServerOptions o;
  ASSERT_TRUE(ApplyConfigFile(path, &o).ok());
  ASSERT_TRUE(ApplySetting("port", "7002", &o).ok());  // as loomd does for given flags
  EXPECT_EQ(o.port, 7002);
  EXPECT_EQ(o.max_queued, 3);
}

TEST(ServerConfigTest, AdminOffLoopbackNeedsATokenOrMtls) {
  ServerOptions o;
  o.admin_host = "0.0.0.0";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o.admin_token_file = "/etc/loom/token";
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
}

TEST(ServerConfigTest, InferenceOffLoopbackNeedsApiKeysOrAnExplicitFlag) {
  for (const char* listener : {"host", "http_host"}) {
    ServerOptions o;
    ASSERT_TRUE(ApplySetting(listener, "0.0.0.0", &o).ok());
    absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << listener;
    EXPECT_NE(s.message().find("api_keys_file"), std::string::npos) << s;
    EXPECT_NE(s.message().find(listener), std::string::npos) << s;
    ServerOptions keyed = o;
    ASSERT_TRUE(ApplySetting("api_keys_file", "/etc/loom/keys.json", &keyed).ok());
    EXPECT_TRUE(keyed.Validate().ok());
    ServerOptions open = o;
    ASSERT_TRUE(ApplySetting("allow_unauthenticated_inference", "true", &open).ok());
    EXPECT_TRUE(open.Validate().ok());
  }
  ServerOptions http_off;  // an HTTP host that does not listen does not count
  ASSERT_TRUE(ApplySetting("http_host", "0.0.0.0", &http_off).ok());
  ASSERT_TRUE(ApplySetting("http_port", "0", &http_off).ok());
  EXPECT_TRUE(http_off.Validate().ok());
  ServerOptions worker;  // a worker serves no inference: its host is the router's
  ASSERT_TRUE(ApplySetting("role", "worker", &worker).ok());
  ASSERT_TRUE(ApplySetting("host", "0.0.0.0", &worker).ok());
  EXPECT_TRUE(worker.Validate().ok());
}

TEST(ServerConfigTest, RequestLimitsAreSettings) {
  ServerOptions o;
  ASSERT_TRUE(ApplyConfigJson(R"({"max_prompt_bytes": 1000, "max_stop_strings": 4,
      "max_new_tokens": 512, "max_top_logprobs": 5, "max_n": 2, "max_request_bytes": 65536,
      "max_streams_per_tenant": 3, "max_prompt_tokens": 300, "max_stop_string_bytes": 32,
      "default_max_tokens": 64})", &o).ok());
  EXPECT_EQ(o.limits.max_prompt_bytes, 1000);
  EXPECT_EQ(o.limits.max_stop_strings, 4);
  EXPECT_EQ(o.limits.max_new_tokens, 512);
  EXPECT_EQ(o.limits.max_top_logprobs, 5);
  EXPECT_EQ(o.limits.max_n, 2);
  EXPECT_EQ(o.limits.max_prompt_tokens, 300);
  EXPECT_EQ(o.limits.max_stop_string_bytes, 32);
  EXPECT_EQ(o.limits.default_max_tokens, 64);
  EXPECT_EQ(o.max_request_bytes, 65536);
  EXPECT_EQ(o.max_streams_per_tenant, 3);
  absl::Status s = ApplySetting("max_top_logprobs", "21", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_top_logprobs"), std::string::npos) << s;
}

TEST(ServerConfigTest, OnlyRealLoopbackAddressesCountAsLoopback) {
  // A host string that merely begins with "127." can be a DNS name anyone registers.
  for (const char* host : {"127.0.0.1", "127.1.2.3", "127.255.255.255", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"127.evil.example", "127.0.0.1.nip.io", "127.0.0.256", "127.0.0",
                           "127.0.0.1.", "127..0.1", "127.0.0.+1", "127.0.0.0001", "127.",
                           "128.0.0.1", "::2", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
  ServerOptions o;
  o.admin_host = "127.evil.example";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument)
      << "an admin listener on a DNS name starting with 127. needs a token";
}

TEST(ServerConfigTest, AdapterLoadLimitsAreSettings) {
  ServerOptions o;
  EXPECT_EQ(o.max_on_demand_loads, 4);
  EXPECT_EQ(o.max_adapter_file_bytes, uint64_t{2} << 30);
  ASSERT_TRUE(ApplySetting("max_on_demand_loads", "2", &o).ok());
  ASSERT_TRUE(ApplySetting("max_adapter_file_bytes", "1048576", &o).ok());
  EXPECT_EQ(o.max_on_demand_loads, 2);
  EXPECT_EQ(o.max_adapter_file_bytes, 1048576u);
  EXPECT_EQ(ApplySetting("max_on_demand_loads", "0", &o).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplySetting("max_adapter_file_bytes", "-1", &o).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServerConfigTest, TlsFilesComeInPairs) {
  ServerOptions o;
  o.tls_cert = "c.pem";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o.tls_key = "k.pem";
  EXPECT_TRUE(o.Validate().ok());
  ServerOptions m;
  m.tls_client_ca = "ca.pem";
  EXPECT_EQ(m.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(ServerConfigTest, QuantSchemeNeedsACheckpointAndAnActivationOverride) {
  ServerOptions o;
  ASSERT_TRUE(ApplySetting("quant_scheme", "w4a8", &o).ok());
  absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("requires quantized"), std::string::npos) << s;
  ASSERT_TRUE(ApplySetting("quantized", "/ckpt", &o).ok());
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_EQ(o.quantized, "/ckpt");
  ASSERT_TRUE(ApplySetting("quant_scheme", "w8a8", &o).ok());
  s = o.Validate();
  EXPECT_NE(s.message().find("weight bits come from the checkpoint"), std::string::npos) << s;
}

TEST(ServerConfigTest, Int8HeadNeedsACheckpoint) {
  ServerOptions o;
  EXPECT_FALSE(o.int8_head);
  ASSERT_TRUE(ApplySetting("int8_head", "true", &o).ok());
  EXPECT_TRUE(o.int8_head);
  absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("int8_head requires quantized"), std::string::npos) << s;
  ASSERT_TRUE(ApplySetting("quantized", "/ckpt", &o).ok());
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_FALSE(ApplySetting("int8_head", "maybe", &o).ok());
}

TEST(ServerConfigTest, KvCacheDtypeParsesTheThreeFormats) {
  ServerOptions o;
  EXPECT_EQ(o.kv_cache_dtype, kernels::KvDtype::kF16);
  ASSERT_TRUE(ApplySetting("kv_cache_dtype", "int8", &o).ok());
  EXPECT_EQ(o.kv_cache_dtype, kernels::KvDtype::kInt8);
  ASSERT_TRUE(ApplySetting("kv_cache_dtype", "int4", &o).ok());
  EXPECT_EQ(o.kv_cache_dtype, kernels::KvDtype::kInt4);
  const absl::Status bad = ApplySetting("kv_cache_dtype", "fp8", &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("kv_cache_dtype"), std::string::npos) << bad;
  EXPECT_NE(bad.message().find("f16, int8 or int4"), std::string::npos) << bad;
  EXPECT_EQ(o.kv_cache_dtype, kernels::KvDtype::kInt4);  // unchanged by the refusal
}

}  // namespace
}  // namespace loom
