#include "server/metrics/server_metrics.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/metrics/exposition_parser.h"

namespace loom {
namespace {

using testing_metrics::Exposition;
using testing_metrics::ParseExposition;

Exposition Scrape(const ServerMetrics& m) { return ParseExposition(m.Render()); }

std::string Req(const std::string& adapter, const std::string& code) {
  return "loom_requests_total{adapter=\"" + adapter + "\",code=\"" + code + "\"}";
}

// Sum of every loom_requests_total series.
double TotalRequests(const Exposition& e) {
  double sum = 0;
  for (const auto& [key, value] : e.series) {
    if (key.rfind("loom_requests_total{", 0) == 0) sum += value;
  }
  return sum;
}

TEST(ServerMetricsTest, ExportsEveryFamilyWithTypeAndHelp) {
  ServerMetrics m;
  Exposition e = Scrape(m);
  const std::vector<std::pair<std::string, std::string>> families = {
      {"loom_time_to_first_token_seconds", "histogram"},
      {"loom_inter_token_latency_seconds", "histogram"},
      {"loom_request_duration_seconds", "histogram"},
      {"loom_prompt_tokens_total", "counter"},
      {"loom_generation_tokens_total", "counter"},
      {"loom_requests_running", "gauge"},
      {"loom_requests_waiting", "gauge"},
      {"loom_batch_tokens", "gauge"},
      {"loom_batch_sequences", "gauge"},
      {"loom_step_tokens", "histogram"},
      {"loom_kv_cache_pages_used", "gauge"},
      {"loom_kv_cache_pages_capacity", "gauge"},
      {"loom_kv_cache_usage_ratio", "gauge"},
      {"loom_preemptions_total", "counter"},
      {"loom_adapters", "gauge"},
      {"loom_adapters_resident", "gauge"},
      {"loom_adapter_resident_bytes", "gauge"},
      {"loom_adapter_load_seconds", "histogram"},
      {"loom_ready", "gauge"},
  };
  for (const auto& [name, type] : families) {
    ASSERT_TRUE(e.types.count(name)) << name << "\n" << m.Render();
    EXPECT_EQ(e.types.at(name), type) << name;
    EXPECT_FALSE(e.help.at(name).empty()) << name;
  }
  // No request has finished yet: no loom_requests_total series (prometheus-cpp then
  // omits the family); the first RecordRequest creates it.
  EXPECT_EQ(TotalRequests(e), 0);
  m.RecordRequest("", "OK");
  EXPECT_EQ(Scrape(m).types.at("loom_requests_total"), "counter");
  for (const char* state : {"LOADING", "READY", "UNLOADING", "FAILED"}) {
    EXPECT_EQ(e.Get(std::string("loom_adapters{state=\"") + state + "\"}"), 0) << state;
  }
  EXPECT_EQ(e.Get("loom_ready"), 0);
}

TEST(ServerMetricsTest, ObserverUpdatesEngineMetrics) {
  ServerMetrics m;
  EngineObserver* o = m.observer();
  o->OnStep(/*batch_tokens=*/100, /*batch_sequences=*/4, /*running=*/3, /*waiting=*/2,
            /*kv_pages_used=*/30, /*kv_pages_total=*/120);
  o->OnStep(20, 5, 5, 0, 40, 160);
  o->OnFirstToken("a", absl::Milliseconds(50));
  o->OnToken("a", absl::Milliseconds(12));
  o->OnToken("", absl::Milliseconds(30));
  o->OnToken("a", absl::Seconds(3));
  o->OnFinish("a", absl::OkStatus(), /*prompt_tokens=*/7, /*completion_tokens=*/5,
              absl::Seconds(2));
  o->OnFinish("", absl::CancelledError(), 11, 0, absl::Milliseconds(300));
  o->OnPreemption();
  o->OnPreemption();
  o->OnPreemption();

  Exposition e = Scrape(m);
  // Gauges hold the last step.
  EXPECT_EQ(e.Get("loom_batch_tokens"), 20);
  EXPECT_EQ(e.Get("loom_batch_sequences"), 5);
  EXPECT_EQ(e.Get("loom_requests_running"), 5);
  EXPECT_EQ(e.Get("loom_requests_waiting"), 0);
  EXPECT_EQ(e.Get("loom_kv_cache_pages_used"), 40);
  EXPECT_EQ(e.Get("loom_kv_cache_pages_capacity"), 160);
  EXPECT_DOUBLE_EQ(e.Get("loom_kv_cache_usage_ratio"), 40.0 / 160.0);
  // Step histogram: 2 steps, 120 tokens; 20 <= 32 < 100 <= 128.
  EXPECT_EQ(e.Get("loom_step_tokens_count"), 2);
  EXPECT_EQ(e.Get("loom_step_tokens_sum"), 120);
  EXPECT_EQ(e.Get("loom_step_tokens_bucket{le=\"16\"}"), 0);
  EXPECT_EQ(e.Get("loom_step_tokens_bucket{le=\"32\"}"), 1);
  EXPECT_EQ(e.Get("loom_step_tokens_bucket{le=\"128\"}"), 2);
  // TTFT 0.05 s: above the 0.04 bucket, inside 0.06.
  EXPECT_EQ(e.Get("loom_time_to_first_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(e.Get("loom_time_to_first_token_seconds_sum"), 0.05);
  EXPECT_EQ(e.Get("loom_time_to_first_token_seconds_bucket{le=\"0.04\"}"), 0);
  EXPECT_EQ(e.Get("loom_time_to_first_token_seconds_bucket{le=\"0.06\"}"), 1);
  // ITL 0.012, 0.03, 3: cumulative buckets 0.015 -> 1, 0.03 -> 2, 2.5 -> 2, 5 -> 3.
  EXPECT_EQ(e.Get("loom_inter_token_latency_seconds_count"), 3);
  EXPECT_NEAR(e.Get("loom_inter_token_latency_seconds_sum"), 3.042, 1e-9);
  EXPECT_EQ(e.Get("loom_inter_token_latency_seconds_bucket{le=\"0.015\"}"), 1);
  EXPECT_EQ(e.Get("loom_inter_token_latency_seconds_bucket{le=\"0.03\"}"), 2);
  EXPECT_EQ(e.Get("loom_inter_token_latency_seconds_bucket{le=\"2.5\"}"), 2);
  EXPECT_EQ(e.Get("loom_inter_token_latency_seconds_bucket{le=\"5\"}"), 3);
  EXPECT_EQ(e.Get("loom_inter_token_latency_seconds_bucket{le=\"+Inf\"}"), 3);
  // Finished requests (any status).
  EXPECT_EQ(e.Get("loom_prompt_tokens_total"), 18);
  EXPECT_EQ(e.Get("loom_generation_tokens_total"), 5);
  EXPECT_EQ(e.Get("loom_request_duration_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(e.Get("loom_request_duration_seconds_sum"), 2.3);
  EXPECT_EQ(e.Get("loom_request_duration_seconds_bucket{le=\"0.25\"}"), 0);
  EXPECT_EQ(e.Get("loom_request_duration_seconds_bucket{le=\"0.5\"}"), 1);
  EXPECT_EQ(e.Get("loom_request_duration_seconds_bucket{le=\"2.5\"}"), 2);
  EXPECT_EQ(e.Get("loom_preemptions_total"), 3);
}

TEST(ServerMetricsTest, KvRatioIsZeroWithoutPool) {
  ServerMetrics m;
  m.observer()->OnStep(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(Scrape(m).Get("loom_kv_cache_usage_ratio"), 0);
}

// The engine reports KV pages only after a step; a cancel that frees pages while the
// engine then idles shows up through the scrape hook's SetEngineStats.
TEST(ServerMetricsTest, ScrapeHookRefreshesEngineGauges) {
  ServerMetrics m;
  m.observer()->OnStep(16, 2, /*running=*/2, /*waiting=*/1, /*kv_pages_used=*/24, 96);
  EngineStats stats;
  stats.kv_pages_total = 96;
  stats.kv_pages_used = 24;
  stats.running = 2;
  int calls = 0;
  m.SetScrapeHook([&] {
    ++calls;
    m.SetEngineStats(stats);
  });
  EXPECT_EQ(Scrape(m).Get("loom_kv_cache_pages_used"), 24);
  // Both requests cancelled: pages released, engine idle (no further OnStep).
  stats.kv_pages_used = 0;
  stats.running = 0;
  Exposition e = Scrape(m);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(e.Get("loom_kv_cache_pages_used"), 0);
  EXPECT_EQ(e.Get("loom_kv_cache_pages_capacity"), 96);
  EXPECT_EQ(e.Get("loom_kv_cache_usage_ratio"), 0);
  EXPECT_EQ(e.Get("loom_requests_running"), 0);
  EXPECT_EQ(e.Get("loom_requests_waiting"), 0);
  EXPECT_EQ(e.Get("loom_batch_tokens"), 16);  // last-step gauges untouched
  m.SetScrapeHook(nullptr);
  (void)m.Render();
  EXPECT_EQ(calls, 2);
}

TEST(ServerMetricsTest, RequestsByAdapterAndCode) {
  ServerMetrics m;
  m.RecordRequest("", "OK");
  m.RecordRequest("alpha", "OK");
  m.RecordRequest("alpha", absl::StatusCode::kOk);
  m.RecordRequest("alpha", absl::StatusCode::kCancelled);
  m.RecordRequest("alpha", "NOT_A_CODE");  // unknown names are bucketed as UNKNOWN
  m.RecordRequest("beta", "RESOURCE_EXHAUSTED");
  Exposition e = Scrape(m);
  EXPECT_EQ(e.Get(Req("base", "OK")), 1);
  EXPECT_EQ(e.Get(Req("alpha", "OK")), 2);
  EXPECT_EQ(e.Get(Req("alpha", "CANCELLED")), 1);
  EXPECT_EQ(e.Get(Req("alpha", "UNKNOWN")), 1);
  EXPECT_EQ(e.Get(Req("beta", "RESOURCE_EXHAUSTED")), 1);
  EXPECT_FALSE(e.Has(Req("alpha", "NOT_A_CODE")));
  EXPECT_EQ(TotalRequests(e), 6);
}

TEST(ServerMetricsTest, ReservedIdsCountAsOther) {
  ServerMetrics m;
  m.RecordRequest("base", "OK");
  m.RecordRequest("other", "OK");
  Exposition e = Scrape(m);
  EXPECT_EQ(e.Get(Req("other", "OK")), 2);
  EXPECT_FALSE(e.Has(Req("base", "OK")));
}

TEST(ServerMetricsTest, AdapterLabelIsCappedForThousandAdapters) {
  ServerMetrics::Options opt;
  opt.max_adapter_labels = 20;
  opt.rerank_interval = absl::InfiniteDuration();
  ServerMetrics m(opt);
  // 1000 adapters; adapter i gets 1 + i % 3 requests; plus base-model requests.
  int total = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 1000; ++i) {
      if (i % 3 >= round) {
        m.RecordRequest("ad" + std::to_string(i), round == 2 ? "CANCELLED" : "OK");
        ++total;
      }
    }
    m.RecordRequest("", "OK");
    ++total;
  }
  Exposition e = Scrape(m);
  std::vector<std::string> labels = e.LabelValues("loom_requests_total", "adapter");
  EXPECT_LE(labels.size(), 20u + 2u);
  // First 20 distinct adapters seen (ad0..ad19) hold the slots; nothing is lost.
  EXPECT_EQ(labels.size(), 22u);
  EXPECT_EQ(e.Get(Req("ad0", "OK")), 1);
  EXPECT_EQ(e.Get(Req("ad2", "OK")), 2);
  EXPECT_EQ(e.Get(Req("ad2", "CANCELLED")), 1);
  EXPECT_FALSE(e.Has(Req("ad20", "OK")));
  EXPECT_EQ(e.Get(Req("base", "OK")), 3);
  EXPECT_EQ(TotalRequests(e), total);
  EXPECT_EQ(m.AdapterLabel("ad999"), "other");
  EXPECT_EQ(m.AdapterLabel("ad5"), "ad5");
  EXPECT_EQ(m.AdapterLabel(""), "base");

  // A window where adapters 500..519 are the busiest: re-ranking gives them the slots.
  for (int rep = 0; rep < 5; ++rep) {
    for (int i = 500; i < 520; ++i) m.RecordRequest("ad" + std::to_string(i), "OK");
  }
  for (int i = 0; i < 1000; ++i) m.RecordRequest("ad" + std::to_string(i), "OK");
  m.RerankAdapterLabels();
  EXPECT_EQ(m.AdapterLabel("ad510"), "ad510");
  EXPECT_EQ(m.AdapterLabel("ad5"), "other");
  m.RecordRequest("ad510", "OK");
  m.RecordRequest("ad5", "OK");
  e = Scrape(m);
  labels = e.LabelValues("loom_requests_total", "adapter");
  EXPECT_LE(labels.size(), 22u);
  EXPECT_EQ(e.Get(Req("ad510", "OK")), 1);   // new series after promotion
  EXPECT_FALSE(e.Has(Req("ad5", "OK")));     // demoted series removed
}

TEST(ServerMetricsTest, RerankTieKeepsHolderAndIdleHolderYieldsOnlyToBusier) {
  ServerMetrics::Options opt;
  opt.max_adapter_labels = 2;
  opt.rerank_interval = absl::InfiniteDuration();
  ServerMetrics m(opt);
  m.RecordRequest("b", "OK");
  m.RecordRequest("a", "OK");  // slots {b, a}
  m.RerankAdapterLabels();     // window b 1, a 1: both keep their slots; new window
  EXPECT_EQ(m.AdapterLabel("a"), "a");
  EXPECT_EQ(m.AdapterLabel("b"), "b");
  m.RecordRequest("a", "OK");
  m.RecordRequest("c", "OK");  // no free slot: other
  EXPECT_EQ(m.AdapterLabel("c"), "other");
  // Window counts: a 1, b 0, c 1 -> a and c outrank the idle holder b.
  m.RerankAdapterLabels();
  EXPECT_EQ(m.AdapterLabel("a"), "a");
  EXPECT_EQ(m.AdapterLabel("c"), "c");
  EXPECT_EQ(m.AdapterLabel("b"), "other");
  // Window: c 2, b 2, a 0 -> c and b outrank the idle holder a.
  m.RecordRequest("c", "OK");
  m.RecordRequest("c", "OK");
  m.RecordRequest("b", "OK");
  m.RecordRequest("b", "OK");
  m.RerankAdapterLabels();
  EXPECT_EQ(m.AdapterLabel("c"), "c");
  EXPECT_EQ(m.AdapterLabel("b"), "b");
  EXPECT_EQ(m.AdapterLabel("a"), "other");
  // Empty window: holders keep their slots.
  m.RerankAdapterLabels();
  EXPECT_EQ(m.AdapterLabel("c"), "c");
  EXPECT_EQ(m.AdapterLabel("b"), "b");
  // N = 1, tie between holder and challenger: the holder keeps the slot.
  ServerMetrics::Options one = opt;
  one.max_adapter_labels = 1;
  ServerMetrics m1(one);
  m1.RecordRequest("z", "OK");
  m1.RecordRequest("a", "OK");
  m1.RerankAdapterLabels();
  EXPECT_EQ(m1.AdapterLabel("z"), "z");
  EXPECT_EQ(m1.AdapterLabel("a"), "other");
}

TEST(ServerMetricsTest, ZeroLabelsPutsEveryAdapterInOther) {
  ServerMetrics::Options opt;
  opt.max_adapter_labels = 0;
  ServerMetrics m(opt);
  m.RecordRequest("a", "OK");
  m.RecordRequest("", "OK");
  m.RerankAdapterLabels();
  m.RecordRequest("a", "OK");
  Exposition e = Scrape(m);
  EXPECT_EQ(e.LabelValues("loom_requests_total", "adapter"),
            (std::vector<std::string>{"base", "other"}));
  EXPECT_EQ(e.Get(Req("other", "OK")), 2);
}

// rerank_interval = 0: every RecordRequest first re-ranks on the window of the calls
// before it (exercises the automatic path without depending on the clock).
TEST(ServerMetricsTest, AutomaticRerankUsesPreviousWindow) {
  ServerMetrics::Options opt;
  opt.max_adapter_labels = 1;
  opt.rerank_interval = absl::ZeroDuration();
  ServerMetrics m(opt);
  m.RecordRequest("a", "OK");  // rerank(empty); a takes the free slot
  m.RecordRequest("b", "OK");  // rerank({a:1}) keeps a; b -> other
  EXPECT_EQ(Scrape(m).Get(Req("other", "OK")), 1);
  m.RecordRequest("b", "OK");  // rerank({b:1}): b beats idle a; a's series removed
  Exposition e = Scrape(m);
  EXPECT_EQ(e.Get(Req("b", "OK")), 1);
  EXPECT_FALSE(e.Has(Req("a", "OK")));
}

TEST(ServerMetricsTest, AdapterStatesAndLoads) {
  ServerMetrics m;
  std::vector<AdapterInfo> infos(5);
  infos[0].state = AdapterState::kReady;
  infos[0].resident = true;
  infos[0].bytes = 1000;
  infos[1].state = AdapterState::kReady;
  infos[1].resident = false;  // evicted
  infos[1].bytes = 500;
  infos[2].state = AdapterState::kLoading;
  infos[3].state = AdapterState::kFailed;
  infos[4].state = AdapterState::kUnloading;
  infos[4].resident = true;
  infos[4].bytes = 24;
  m.SetAdapterStates(infos);
  Exposition e = Scrape(m);
  EXPECT_EQ(e.Get("loom_adapters{state=\"READY\"}"), 2);
  EXPECT_EQ(e.Get("loom_adapters{state=\"LOADING\"}"), 1);
  EXPECT_EQ(e.Get("loom_adapters{state=\"FAILED\"}"), 1);
  EXPECT_EQ(e.Get("loom_adapters{state=\"UNLOADING\"}"), 1);
  EXPECT_EQ(e.Get("loom_adapters_resident"), 2);
  EXPECT_EQ(e.Get("loom_adapter_resident_bytes"), 1024);
  // A later snapshot replaces, not adds.
  m.SetAdapterStates({infos[0]});
  e = Scrape(m);
  EXPECT_EQ(e.Get("loom_adapters{state=\"READY\"}"), 1);
  EXPECT_EQ(e.Get("loom_adapters{state=\"LOADING\"}"), 0);
  EXPECT_EQ(e.Get("loom_adapter_resident_bytes"), 1000);

  m.ObserveAdapterLoad(0.2, true);
  m.ObserveAdapterLoad(0.3, true);
  m.ObserveAdapterLoad(0.002, false);
  e = Scrape(m);
  EXPECT_EQ(e.Get("loom_adapter_load_seconds_count{result=\"ok\"}"), 2);
  EXPECT_DOUBLE_EQ(e.Get("loom_adapter_load_seconds_sum{result=\"ok\"}"), 0.5);
  EXPECT_EQ(e.Get("loom_adapter_load_seconds_bucket{le=\"0.25\",result=\"ok\"}"), 1);
  EXPECT_EQ(e.Get("loom_adapter_load_seconds_count{result=\"error\"}"), 1);
  EXPECT_EQ(e.Get("loom_adapter_load_seconds_bucket{le=\"0.005\",result=\"error\"}"), 1);
}

TEST(ServerMetricsTest, Readiness) {
  ServerMetrics m;
  EXPECT_FALSE(m.ready());
  m.SetReady(true);
  EXPECT_TRUE(m.ready());
  EXPECT_EQ(Scrape(m).Get("loom_ready"), 1);
  m.SetReady(false);
  EXPECT_FALSE(m.ready());
  EXPECT_EQ(Scrape(m).Get("loom_ready"), 0);
}

// gRPC threads record requests while the engine thread reports and a scraper renders:
// nothing is lost (counts are exact). Checked clean under TSan by hand with std::mutex
// substituted for absl::Mutex (Debian's absl is not TSan-instrumented, so with it TSan
// reports false races).
TEST(ServerMetricsTest, ConcurrentUpdatesAreExact) {
  ServerMetrics::Options opt;
  opt.max_adapter_labels = 3;
  opt.rerank_interval = absl::InfiniteDuration();
  ServerMetrics m(opt);
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < kPerThread; ++i) {
        m.RecordRequest(i % 5 == 0 ? "" : "ad" + std::to_string((i + t) % 7), "OK");
      }
    });
  }
  threads.emplace_back([&m] {
    for (int i = 0; i < kPerThread; ++i) {
      m.observer()->OnToken("a", absl::Milliseconds(1));
      m.observer()->OnStep(1, 1, 1, 0, i, 10000);
    }
  });
  threads.emplace_back([&m] {
    for (int i = 0; i < 50; ++i) (void)m.Render();
  });
  for (auto& t : threads) t.join();
  Exposition e = Scrape(m);
  EXPECT_EQ(TotalRequests(e), kThreads * kPerThread);
  EXPECT_EQ(e.Get(Req("base", "OK")), kThreads * kPerThread / 5);
  EXPECT_LE(e.LabelValues("loom_requests_total", "adapter").size(), 3u + 2u);
  EXPECT_EQ(e.Get("loom_inter_token_latency_seconds_count"), kPerThread);
  EXPECT_EQ(e.Get("loom_kv_cache_pages_used"), kPerThread - 1);
}

// vllm:lora_requests_info's shape: one series, the state in its labels, the update time
// as its value; a change of state replaces the series.
TEST(ServerMetricsTest, LoraRequestsInfoIsOneSeriesWithTheStateInItsLabels) {
  ServerMetrics m;
  m.lora_requests_info()->Set({"a", "b"}, {"c"}, 4, absl::FromUnixSeconds(1700000000));
  std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE loom_lora_requests_info gauge"), std::string::npos);
  EXPECT_NE(text.find(R"(loom_lora_requests_info{max_lora="4",running_lora_adapters="a,b",)"
                      R"(waiting_lora_adapters="c"} 1700000000)"),
            std::string::npos)
      << text;
  m.lora_requests_info()->Set({}, {}, 4, absl::FromUnixSeconds(1700000005));
  text = m.Render();
  EXPECT_EQ(text.find("running_lora_adapters=\"a,b\""), std::string::npos) << text;
  EXPECT_NE(text.find(R"(loom_lora_requests_info{max_lora="4",running_lora_adapters="",)"
                      R"(waiting_lora_adapters=""} 1700000005)"),
            std::string::npos)
      << text;
}

// Tenant labels are capped like adapter labels.
TEST(ServerMetricsTest, TenantLabelsAreCapped) {
  ServerMetrics::Options o;
  o.max_tenant_labels = 2;
  ServerMetrics m(o);
  for (const char* t : {"acme", "globex", "initech", "umbrella"}) {
    m.tenants()->RecordRequest(t, absl::StatusCode::kOk);
    m.tenants()->RecordTokens(t, 10, 5);
  }
  Exposition e = Scrape(m);
  EXPECT_EQ(e.LabelValues("loom_tenant_requests_total", "tenant").size(), 3u);  // + other
  EXPECT_EQ(e.Get(R"(loom_tenant_requests_total{code="OK",tenant="other"})"), 2);
  EXPECT_EQ(e.Get(R"(loom_tenant_prompt_tokens_total{tenant="acme"})"), 10);
  EXPECT_EQ(e.Get(R"(loom_tenant_generation_tokens_total{tenant="other"})"), 10);
}

}  // namespace
}  // namespace loom
