// loom-bench (Bazel target //clients/bench:loom_bench): an open-loop load generator for
// loom.v1.Inference/Generate. Requests arrive as a Poisson process at --rate req/s (sent
// whether or not earlier ones finished, up to --max-inflight concurrent streams; arrivals
// beyond that are counted as dropped), each naming an adapter chosen by one of Punica's
// workloads, with prompt and output lengths drawn from distributions. Streams use the
// gRPC callback API (no thread per request).
//
// Reports completed requests, errors by status code, throughput (requests/s and output
// tokens/s over the run), and p50/p90/p99 of time to first token, inter-token latency
// (a message carrying k tokens after a gap g counts as k gaps of g/k) and end-to-end
// latency; --json prints the same as one JSON object.
//
// Flag names accept '-' or '_' (--max-tokens == --max_tokens).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "clients/bench/workload.h"
#include "clients/cpp/loom_client.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "Inference endpoint host:port");
ABSL_FLAG(double, rate, 1.0, "mean arrival rate, requests per second (Poisson)");
ABSL_FLAG(double, duration, 0, "seconds to send for (0: use --requests)");
ABSL_FLAG(int64_t, requests, 100, "number of requests to send (when --duration is 0)");
ABSL_FLAG(std::string, workload, "identical", "identical | distinct | uniform | skewed");
ABSL_FLAG(int, adapters, 0, "adapter pool size; 0 = every request uses the base model");
ABSL_FLAG(std::string, adapter_prefix, "adapter-", "adapter ids are <prefix>0..<prefix>N-1");
ABSL_FLAG(double, zipf_alpha, 1.5, "skewed workload's Zipf exponent");
ABSL_FLAG(std::string, prompt_len, "uniform:32:256",
          "prompt length in words (~tokens): N | uniform:A:B | exp:MEAN:MAX");
ABSL_FLAG(std::string, prompts_file, "", "one prompt per line, picked at random (overrides --prompt-len)");
ABSL_FLAG(std::string, max_tokens, "uniform:16:128", "output tokens: N | uniform:A:B | exp:MEAN:MAX");
ABSL_FLAG(bool, ignore_eos, true, "generate exactly max_tokens (end-of-generation tokens ignored)");
ABSL_FLAG(double, temperature, 0.0, "sampling temperature (0 = greedy)");
ABSL_FLAG(uint64_t, seed, 1, "seed of arrivals, adapters, lengths and sampling");
ABSL_FLAG(int, max_inflight, 1024, "most concurrent streams; arrivals beyond are dropped");
ABSL_FLAG(double, drain_timeout, 600, "seconds to wait for in-flight requests after sending");
ABSL_FLAG(double, request_timeout, 0, "per-request deadline in seconds (0 = none)");
ABSL_FLAG(std::string, token_file, "", "bearer token file");
ABSL_FLAG(std::string, tls_ca, "", "CA bundle (PEM); enables TLS");
ABSL_FLAG(std::string, tls_cert, "", "client certificate (PEM) for mTLS");
ABSL_FLAG(std::string, tls_key, "", "client key (PEM) for mTLS");
ABSL_FLAG(bool, json, false, "print the report as JSON");

namespace loom::bench {
namespace {

struct Record {
  std::string adapter;
  absl::Time start;
  absl::Time first_token = absl::InfinitePast();
  absl::Time last_token = absl::InfinitePast();
  absl::Time end;
  int tokens = 0;
  int prompt_tokens = 0;
  std::vector<double> itl_ms;
  absl::Status status;
  bool done = false;
};

struct Shared {
  absl::Mutex mu;
  int inflight ABSL_GUARDED_BY(mu) = 0;
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

nlohmann::json Summary(const std::vector<double>& v) {
  nlohmann::json j;
  double sum = 0;
  for (double x : v) sum += x;
  j["count"] = v.size();
  j["mean"] = v.empty() ? 0.0 : sum / v.size();
  j["p50"] = Percentile(v, 50);
  j["p90"] = Percentile(v, 90);
  j["p99"] = Percentile(v, 99);
  return j;
}

int Main(int argc, char** argv) {
  // Accept --flag-name as --flag_name.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    std::replace(a.begin() + 2, a.begin() + end, '-', '_');
  }
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  absl::SetProgramUsageMessage("open-loop load generator for loomd (see clients/bench/README.md)");
  absl::ParseCommandLine(static_cast<int>(cargv.size()), cargv.data());

  auto fail = [](const absl::Status& s) {
    std::cerr << "loom-bench: " << absl::StatusCodeToString(s.code()) << ": " << s.message() << "\n";
    return 1;
  };
  const double rate = absl::GetFlag(FLAGS_rate);
  const double duration = absl::GetFlag(FLAGS_duration);
  const int64_t max_requests = absl::GetFlag(FLAGS_requests);
  if (!(rate > 0)) return fail(absl::InvalidArgumentError("--rate must be > 0"));
  if (duration < 0 || (duration == 0 && max_requests < 1)) {
    return fail(absl::InvalidArgumentError("need --duration > 0 or --requests >= 1"));
  }
  absl::StatusOr<Workload> workload = ParseWorkload(absl::GetFlag(FLAGS_workload));
  if (!workload.ok()) return fail(workload.status());
  const int pool = absl::GetFlag(FLAGS_adapters);
  if (pool < 0) return fail(absl::InvalidArgumentError("--adapters must be >= 0"));
  const int64_t expected = duration > 0 ? static_cast<int64_t>(rate * duration) : max_requests;
  absl::StatusOr<AdapterPicker> picker =
      AdapterPicker::Create(*workload, std::max(pool, 1), expected, absl::GetFlag(FLAGS_zipf_alpha));
  if (!picker.ok()) return fail(picker.status());
  absl::StatusOr<LengthDistribution> prompt_len = LengthDistribution::Parse(absl::GetFlag(FLAGS_prompt_len));
  if (!prompt_len.ok()) return fail(prompt_len.status());
  absl::StatusOr<LengthDistribution> out_len = LengthDistribution::Parse(absl::GetFlag(FLAGS_max_tokens));
  if (!out_len.ok()) return fail(out_len.status());
  std::vector<std::string> prompts;
  if (const std::string f = absl::GetFlag(FLAGS_prompts_file); !f.empty()) {
    std::ifstream in(f);
    if (!in) return fail(absl::NotFoundError(absl::StrCat("cannot read ", f)));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) prompts.push_back(line);
    }
    if (prompts.empty()) return fail(absl::InvalidArgumentError(absl::StrCat(f, " has no prompts")));
  }

  ClientOptions options;
  if (const std::string f = absl::GetFlag(FLAGS_token_file); !f.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(f);
    if (!token.ok()) return fail(token.status());
    options.token = *token;
  }
  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  if (const double t = absl::GetFlag(FLAGS_request_timeout); t > 0) {
    options.generate_deadline = absl::Seconds(t);
  }
  absl::StatusOr<std::unique_ptr<LoomClient>> client = LoomClient::Create(absl::GetFlag(FLAGS_addr), options);
  if (!client.ok()) return fail(client.status());

  Rng rng(absl::GetFlag(FLAGS_seed));
  PoissonArrivals arrivals(rate);
  const int max_inflight = std::max(1, absl::GetFlag(FLAGS_max_inflight));
  const std::string prefix = absl::GetFlag(FLAGS_adapter_prefix);

  std::vector<std::unique_ptr<Record>> records;
  Shared shared;
  int64_t dropped = 0;
  const absl::Time t0 = absl::Now();
  double next_s = 0;
  for (int64_t i = 0;; ++i) {
    next_s += arrivals.NextGapSeconds(rng);
    if (duration > 0 ? next_s > duration : i >= max_requests) break;
    // Draw everything for this request before waiting, so the sequence of requests does
    // not depend on timing.
    const int adapter_index = picker->Next(rng);
    const int words = prompt_len->Sample(rng);
    const int max_tokens = out_len->Sample(rng);
    v1::GenerateRequest req;
    if (pool > 0) req.set_adapter_id(absl::StrCat(prefix, adapter_index));
    if (!prompts.empty()) {
      req.set_text(prompts[std::uniform_int_distribution<size_t>(0, prompts.size() - 1)(rng)]);
    } else {
      req.set_text(MakeWordPrompt(words, rng));
    }
    req.set_max_tokens(max_tokens);
    req.set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
    req.mutable_sampling()->set_temperature(static_cast<float>(absl::GetFlag(FLAGS_temperature)));
    req.mutable_sampling()->set_seed(absl::GetFlag(FLAGS_seed) * 1000003u + static_cast<uint64_t>(i));

    absl::SleepFor(t0 + absl::Seconds(next_s) - absl::Now());
    {
      absl::MutexLock l(&shared.mu);
      if (shared.inflight >= max_inflight) {
        ++dropped;
        continue;
      }
      ++shared.inflight;
    }
    records.push_back(std::make_unique<Record>());
    Record* rec = records.back().get();
    rec->adapter = req.adapter_id();
    rec->start = absl::Now();
    (*client)->GenerateAsync(
        req,
        [rec](const v1::GenerateResponse& m) {
          // Messages of one stream arrive in order, never concurrently.
          const absl::Time now = absl::Now();
          const int k = m.token_ids_size();
          if (k > 0) {
            if (rec->tokens == 0) {
              rec->first_token = now;
            } else {
              const double gap = Ms(now - rec->last_token) / k;
              for (int j = 0; j < k; ++j) rec->itl_ms.push_back(gap);
            }
            rec->tokens += k;
            rec->last_token = now;
          }
          if (m.has_usage()) rec->prompt_tokens = m.usage().prompt_tokens();
          return true;
        },
        [rec, &shared](absl::Status s) {
          const absl::Time now = absl::Now();
          absl::MutexLock l(&shared.mu);
          rec->end = now;
          rec->status = std::move(s);
          rec->done = true;
          --shared.inflight;
        });
  }
  const absl::Time sent_end = absl::Now();
  bool drained;
  {
    absl::MutexLock l(&shared.mu);
    auto idle = [&shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared.mu) { return shared.inflight == 0; };
    drained = shared.mu.AwaitWithTimeout(absl::Condition(&idle),
                                         absl::Seconds(absl::GetFlag(FLAGS_drain_timeout)));
  }

  // Aggregate (records of unfinished requests are read under the lock).
  absl::MutexLock l(&shared.mu);
  std::vector<double> ttft, itl, e2e;
  std::map<std::string, int64_t> errors;
  std::map<std::string, std::string> error_samples;
  int64_t completed = 0, unfinished = 0, out_tokens = 0, in_tokens = 0;
  absl::Time last_end = t0;
  for (const auto& r : records) {
    if (!r->done) {
      ++unfinished;
      continue;
    }
    last_end = std::max(last_end, r->end);
    if (!r->status.ok()) {
      const std::string code = absl::StatusCodeToString(r->status.code());
      ++errors[code];
      error_samples.emplace(code, std::string(r->status.message()));
      continue;
    }
    ++completed;
    out_tokens += r->tokens;
    in_tokens += r->prompt_tokens;
    if (r->tokens > 0) ttft.push_back(Ms(r->first_token - r->start));
    itl.insert(itl.end(), r->itl_ms.begin(), r->itl_ms.end());
    e2e.push_back(Ms(r->end - r->start));
  }
  const double elapsed = absl::ToDoubleSeconds(std::max(last_end, sent_end) - t0);
  int64_t error_total = 0;
  for (const auto& [code, n] : errors) error_total += n;

  nlohmann::json report;
  report["config"] = {{"addr", absl::GetFlag(FLAGS_addr)},
                      {"workload", WorkloadName(*workload)},
                      {"adapters", pool},
                      {"adapters_in_use", pool > 0 ? picker->adapters_in_use() : 0},
                      {"rate", rate},
                      {"prompt_len", prompts.empty() ? prompt_len->ToString() : "file"},
                      {"max_tokens", out_len->ToString()},
                      {"seed", absl::GetFlag(FLAGS_seed)}};
  report["sent"] = static_cast<int64_t>(records.size());
  report["completed"] = completed;
  report["errors"] = error_total;
  report["errors_by_code"] = errors;
  report["error_samples"] = error_samples;
  report["dropped"] = dropped;
  report["unfinished"] = unfinished;
  report["elapsed_s"] = elapsed;
  report["throughput"] = {{"requests_per_s", elapsed > 0 ? completed / elapsed : 0.0},
                          {"output_tokens_per_s", elapsed > 0 ? out_tokens / elapsed : 0.0},
                          {"prompt_tokens_per_s", elapsed > 0 ? in_tokens / elapsed : 0.0}};
  report["output_tokens"] = out_tokens;
  report["prompt_tokens"] = in_tokens;
  report["ttft_ms"] = Summary(ttft);
  report["itl_ms"] = Summary(itl);
  report["e2e_ms"] = Summary(e2e);

  if (absl::GetFlag(FLAGS_json)) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat(
        "workload %s, %d adapters (%d in use), rate %.2f req/s, prompt %s, max_tokens %s\n",
        WorkloadName(*workload), pool, pool > 0 ? picker->adapters_in_use() : 0, rate,
        prompts.empty() ? prompt_len->ToString() : "file", out_len->ToString());
    std::cout << absl::StrFormat("sent %d, completed %d, errors %d, dropped %d, unfinished %d\n",
                                 records.size(), completed, error_total, dropped, unfinished);
    for (const auto& [code, n] : errors) {
      std::cout << absl::StrFormat("  %s x%d (e.g. %s)\n", code, n, error_samples[code]);
    }
    std::cout << absl::StrFormat(
        "elapsed %.2f s: %.2f req/s, %.1f output tok/s, %.1f prompt tok/s\n", elapsed,
        elapsed > 0 ? completed / elapsed : 0.0, elapsed > 0 ? out_tokens / elapsed : 0.0,
        elapsed > 0 ? in_tokens / elapsed : 0.0);
    std::cout << absl::StrFormat("%-10s %10s %10s %10s %10s\n", "ms", "p50", "p90", "p99", "mean");
    for (const auto& [name, key] : std::vector<std::pair<const char*, const char*>>{
             {"TTFT", "ttft_ms"}, {"ITL", "itl_ms"}, {"E2E", "e2e_ms"}}) {
      const auto& s = report[key];
      std::cout << absl::StrFormat("%-10s %10.2f %10.2f %10.2f %10.2f\n", name,
                                   s["p50"].get<double>(), s["p90"].get<double>(),
                                   s["p99"].get<double>(), s["mean"].get<double>());
    }
  }
  if (!drained) std::cerr << "loom-bench: " << unfinished << " requests still running at exit\n";
  // Exit 1 when nothing completed (server down, all errors), so scripts notice.
  if (completed == 0) return 1;
  if (!drained) std::_Exit(0);  // streams still running: do not wait for them
  return 0;
}

}  // namespace
}  // namespace loom::bench

int main(int argc, char** argv) { return loom::bench::Main(argc, argv); }
