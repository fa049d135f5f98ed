// What the gRPC hop costs: the same greedy generations on the engine directly and
// through a RemoteWorker -> WorkerService (loopback, this process) -> the same engine,
// alternating, median of --repeats; and how long a lost worker takes to
// be noticed (server stopped mid-stream: stream end, Load() Unavailable).
//   bazel run //scheduler/cluster:remote_worker_benchmark -- --streams=4 --tokens=64
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "scheduler/cluster/remote_worker.h"
#include "scheduler/engine/engine_test_support.h"
#include "server/worker/worker_service.h"

ABSL_FLAG(int, streams, 4, "concurrent streams");
ABSL_FLAG(int, tokens, 64, "tokens per stream");
ABSL_FLAG(int, repeats, 5, "alternating repeats (median reported)");
ABSL_FLAG(int, threads, 2, "kernel threads");

namespace loom {
namespace {

double RunBatch(Worker* w, const std::vector<WorkerRequest>& reqs) {
  std::vector<std::unique_ptr<testing::EventCollector>> cs;
  const absl::Time t0 = absl::Now();
  for (const WorkerRequest& r : reqs) {
    cs.push_back(std::make_unique<testing::EventCollector>());
    if (!w->Start(r, cs.back()->Callback()).ok()) return -1;
  }
  for (auto& c : cs) c->Wait();
  return absl::ToDoubleSeconds(absl::Now() - t0);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  const char* tmp = std::getenv("TMPDIR");
  auto world = testing::WorkerWorld::Create(std::string(tmp ? tmp : "/tmp") + "/rw_bench",
                                            absl::GetFlag(FLAGS_threads));
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  Engine& local = *(*world)->engine;
  std::atomic<bool> serving{true};
  WorkerService service(&local, &serving, nullptr);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  RemoteWorkerOptions ro;
  ro.target = "127.0.0.1:" + std::to_string(port);
  auto remote = RemoteWorker::Create(ro);
  if (!remote.ok() || !(*remote)->WaitUntilReady(absl::Seconds(30)).ok()) return 1;

  const char* texts[] = {"The capital of France is", "Once upon a time,", "def fibonacci(n):",
                         "The three primary colors are"};
  std::vector<WorkerRequest> reqs;
  for (int i = 0; i < absl::GetFlag(FLAGS_streams); ++i) {
    WorkerRequest r;
    r.context = testing::Encode(**world, texts[i % 4]);
    r.max_new_tokens = absl::GetFlag(FLAGS_tokens);
    r.stop_at_end_of_generation = false;
    reqs.push_back(r);
  }
  RunBatch(&local, reqs);  // warm-up
  std::vector<double> in_process, over_grpc;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
    in_process.push_back(RunBatch(&local, reqs));
    over_grpc.push_back(RunBatch(remote->get(), reqs));
  }
  const double tokens = static_cast<double>(reqs.size()) * absl::GetFlag(FLAGS_tokens);
  std::printf("streams=%zu tokens_per_stream=%d repeats=%d\n", reqs.size(),
              absl::GetFlag(FLAGS_tokens), absl::GetFlag(FLAGS_repeats));
  std::printf("in_process  median %.3f s  %.1f tok/s\n", Median(in_process),
              tokens / Median(in_process));
  std::printf("remote_grpc median %.3f s  %.1f tok/s  (%+.1f%%)\n", Median(over_grpc),
              tokens / Median(over_grpc),
              100.0 * (Median(over_grpc) / Median(in_process) - 1.0));

  // Loss detection: stop the server mid-stream.
  testing::EventCollector c;
  WorkerRequest long_req = reqs[0];
  long_req.max_new_tokens = 1000;
  if (!(*remote)->Start(long_req, c.Callback()).ok()) return 1;
  while (c.tokens().empty()) absl::SleepFor(absl::Milliseconds(5));
  const absl::Time t0 = absl::Now();
  server->Shutdown(std::chrono::system_clock::now());
  c.Wait();
  const absl::Duration stream_end = absl::Now() - t0;
  while ((*remote)->Load().ok()) absl::SleepFor(absl::Milliseconds(1));
  const absl::Duration load_gone = absl::Now() - t0;
  std::printf("server stopped mid-stream: stream ended (%s) after %.1f ms, Load() "
              "Unavailable after %.1f ms (heartbeat %s x %d)\n",
              c.final_event().error.ToString().c_str(),
              absl::ToDoubleMilliseconds(stream_end), absl::ToDoubleMilliseconds(load_gone),
              absl::FormatDuration(ro.heartbeat_interval).c_str(), ro.missed_heartbeats);
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return loom::Main();
}
