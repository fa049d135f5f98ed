// A ServerMetrics fed a fixed set of synthetic events (every metric family gets data),
// for the exposition lint and the real-Prometheus scrape tests.
//
//   synthetic_metrics_server --print
//       prints the text exposition to stdout and exits 0.
//   synthetic_metrics_server --serve=PORT_FILE [--seconds=N]
//       serves /metrics on 127.0.0.1 (a free port, written to PORT_FILE once listening),
//       ready = true, for N seconds (default 300) or until killed.
//
// The events (and so the values the tests expect):
//   loom_requests_total{adapter="alpha",code="OK"} 3, {alpha,CANCELLED} 1,
//   {base,OK} 2, {beta,RESOURCE_EXHAUSTED} 1
//   loom_kv_cache_pages_used 37, loom_kv_cache_pages_capacity 148 (ratio 0.25)
//   loom_prompt_tokens_total 30, loom_generation_tokens_total 12, loom_preemptions_total 2
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"

namespace loom {
namespace {

void Feed(ServerMetrics& m) {
  m.RecordRequest("alpha", "OK");
  m.RecordRequest("alpha", "OK");
  m.RecordRequest("alpha", "OK");
  m.RecordRequest("alpha", "CANCELLED");
  m.RecordRequest("", "OK");
  m.RecordRequest("", "OK");
  m.RecordRequest("beta", "RESOURCE_EXHAUSTED");
  EngineObserver* o = m.observer();
  o->OnStep(/*batch_tokens=*/64, /*batch_sequences=*/3, /*running=*/3, /*waiting=*/1,
            /*kv_pages_used=*/37, /*kv_pages_total=*/148);
  o->OnFirstToken("alpha", absl::Milliseconds(45));
  o->OnToken("alpha", absl::Milliseconds(20));
  o->OnToken("alpha", absl::Milliseconds(22));
  o->OnFinish("alpha", absl::OkStatus(), 20, 8, absl::Milliseconds(900));
  o->OnFinish("", absl::CancelledError(), 10, 4, absl::Milliseconds(400));
  o->OnPreemption();
  o->OnPreemption();
  std::vector<AdapterInfo> adapters(3);
  adapters[0].id = "alpha";
  adapters[0].state = AdapterState::kReady;
  adapters[0].resident = true;
  adapters[0].bytes = 4718592;
  adapters[1].id = "beta";
  adapters[1].state = AdapterState::kReady;
  adapters[2].id = "broken";
  adapters[2].state = AdapterState::kFailed;
  m.SetAdapterStates(adapters);
  m.ObserveAdapterLoad(0.12, true);
  m.ObserveAdapterLoad(0.003, false);
  m.SetReady(true);
}

int Main(int argc, char** argv) {
  std::string port_file;
  int seconds = 300;
  bool print = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--print") {
      print = true;
    } else if (absl::StartsWith(arg, "--serve=")) {
      port_file = arg.substr(8);
    } else if (absl::StartsWith(arg, "--seconds=") && absl::SimpleAtoi(arg.substr(10), &seconds)) {
    } else {
      std::cerr << "usage: " << argv[0] << " --print | --serve=PORT_FILE [--seconds=N]\n";
      return 2;
    }
  }
  if (print == !port_file.empty()) {
    std::cerr << "exactly one of --print and --serve=PORT_FILE\n";
    return 2;
  }
  ServerMetrics metrics;
  Feed(metrics);
  if (print) {
    std::cout << metrics.Render();
    return 0;
  }
  HttpEndpoint http;
  absl::Status s = http.Start("127.0.0.1", 0, &metrics);
  if (!s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  {  // write-then-rename so a reader never sees a partial file
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << http.port() << "\n";
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::cerr << "cannot write " << port_file << "\n";
      return 1;
    }
  }
  std::cerr << "serving /metrics on 127.0.0.1:" << http.port() << "\n";
  absl::SleepFor(absl::Seconds(seconds));
  http.Stop();
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) { return loom::Main(argc, argv); }
