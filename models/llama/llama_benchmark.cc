// Base-model throughput of LlamaModel on the CPU backend, and batch-1 decode as a fraction
// of the memory-bandwidth bound. Not a test: run by scripts/bench_base_model.sh next to
// scripts/bench_llamacpp.py, which measures llama.cpp the same way.
//
// For each configuration BxP (B sequences of P prompt tokens):
//   prefill: the B*P prompt tokens, sequences laid out one after another, cut into steps of
//            at most --token_budget tokens (one Forward per step; a sequence may span
//            steps); logits only for each sequence's last prompt token.
//            tokens/s = B*P / time.
//   decode:  then --decode_steps steps of one token per sequence (one Forward each); the
//            next token is the argmax of the sequence's logits. tokens/s = B*D / time.
// One warm-up run, then the median of --runs runs (the fastest run is reported too).
//
// Bandwidth bound of batch-1 decode: bytes read per token = every weight byte the step
// touches (all layer projections and norms, the output norm, the output matrix -- the tied
// token_embd read again as output -- and one embedding row) + the K/V bytes attended
// (average context over the decode steps); read bandwidth = a --threads-thread AVX2
// streaming read of a --bandwidth_mib buffer (best of 5 passes).
//
// Output: a table on stdout and one JSON line (stdout, and --json_out when given).

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/batch_plan.h"
#include "models/llama/llama_model.h"
#include "models/llama/bench_runner.h"
#include "models/llama/bench_stats.h"
#include "models/llama/read_bandwidth.h"
#include "models/testing/test_model.h"
#include "models/weights/model_source.h"

ABSL_FLAG(std::string, model, "", "GGUF file or HF directory (default: the test model)");
ABSL_FLAG(int, threads, 2, "CPU threads (backend and bandwidth probe)");
ABSL_FLAG(std::string, configs, "1x512,1x128,8x128,32x128",
          "comma-separated BxP: B sequences of P prompt tokens");
ABSL_FLAG(int, decode_steps, 64, "decode steps after each prefill");
ABSL_FLAG(int, runs, 3, "measured runs per configuration (median reported)");
ABSL_FLAG(int, token_budget, 512, "max tokens per prefill step");
ABSL_FLAG(int, bandwidth_mib, 1024, "buffer size of the read-bandwidth probe");
ABSL_FLAG(uint32_t, seed, 1, "prompt token seed");
ABSL_FLAG(std::string, json_out, "", "also write the JSON line to this file");

namespace loom {
namespace {

using bench::Median;

using bench::Config;
using bench::ParseConfigs;
using bench::RunTimes;
using bench::Runner;

// Weight bytes one decode step of one token reads (see the file comment).
size_t WeightBytesPerToken(const ModelSource& src) {
  size_t bytes = 0;
  const WeightTensor* embd = nullptr;
  for (const auto& [name, t] : src.tensors()) {
    if (name == "token_embd.weight") {
      embd = &t;
      continue;
    }
    bytes += t.nbytes;
  }
  if (embd != nullptr) {
    bytes += embd->row_bytes();                               // the token's embedding row
    if (src.config().tied_embeddings) bytes += embd->nbytes;  // read again as output
  }
  return bytes;
}

struct Result {
  std::string phase;
  int batch, prompt_len, tokens;
  double median_s, tok_s;
  double best_tok_s;  // fastest run: less sensitive to other load on the machine
};

absl::Status Main() {
  const int threads = absl::GetFlag(FLAGS_threads);
  const int steps = absl::GetFlag(FLAGS_decode_steps);
  const int runs = absl::GetFlag(FLAGS_runs);
  const int budget = absl::GetFlag(FLAGS_token_budget);
  if (threads < 1 || steps < 1 || runs < 1 || budget < 1) {
    return absl::InvalidArgumentError("--threads, --decode_steps, --runs, --token_budget >= 1");
  }
  absl::StatusOr<std::vector<Config>> configs = ParseConfigs(absl::GetFlag(FLAGS_configs));
  if (!configs.ok()) return configs.status();
  std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty()) path = testing::DefaultModelPath();

  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackend(threads);
  if (backend == nullptr) return absl::InternalError("CreateCpuBackend failed");
  absl::StatusOr<std::unique_ptr<ModelSource>> src = ModelSource::Open(path);
  if (!src.ok()) return src.status();
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Create(*std::move(src), backend.get());
  if (!model.ok()) return model.status();
  const LlamaConfig& cfg = (*model)->config();

  KvCacheOptions kvo;
  kvo.n_pages = bench::PagesFor(*configs, steps, kvo.page_size);
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv = PagedKvCache::Create(cfg, kvo);
  if (!kv.ok()) return kv.status();

  Runner runner(model->get(), kv->get(), budget, steps);
  std::vector<Result> results;
  for (size_t ci = 0; ci < configs->size(); ++ci) {
    const Config& c = (*configs)[ci];
    const std::vector<std::vector<int32_t>> prompts = bench::RandomPrompts(
        c, cfg.vocab_size, absl::GetFlag(FLAGS_seed) + static_cast<uint32_t>(ci));
    if (absl::StatusOr<RunTimes> w = runner.Run(prompts); !w.ok()) return w.status();
    std::vector<double> pre, dec;
    for (int r = 0; r < runs; ++r) {
      absl::StatusOr<RunTimes> t = runner.Run(prompts);
      if (!t.ok()) return t.status();
      pre.push_back(t->prefill_s);
      dec.push_back(t->decode_s);
    }
    const double mp = Median(pre), md = Median(dec);
    const double bp = *std::min_element(pre.begin(), pre.end());
    const double bd = *std::min_element(dec.begin(), dec.end());
    results.push_back({"prefill", c.batch, c.prompt_len, c.batch * c.prompt_len, mp,
                       c.batch * c.prompt_len / mp, c.batch * c.prompt_len / bp});
    results.push_back({"decode", c.batch, c.prompt_len, c.batch * steps, md,
                       c.batch * steps / md, c.batch * steps / bd});
  }

  absl::StatusOr<double> bw =
      MeasureReadBandwidth(size_t(absl::GetFlag(FLAGS_bandwidth_mib)) << 20, threads, 5);
  if (!bw.ok()) return bw.status();
  const size_t weight_bytes = WeightBytesPerToken((*model)->source());

  absl::PrintF("Loom %s backend, %d threads, token budget %d, median of %d\n",
               backend->name(), threads, budget, runs);
  absl::PrintF("%-8s %3s %4s %7s %9s %9s %9s\n", "phase", "B", "P", "tokens", "seconds",
               "tok/s", "best");
  for (const Result& r : results) {
    absl::PrintF("%-8s %3d %4d %7d %9.4f %9.1f %9.1f\n", r.phase, r.batch, r.prompt_len,
                 r.tokens, r.median_s, r.tok_s, r.best_tok_s);
  }
  absl::PrintF("read bandwidth (%d threads, AVX2 stream): %.2f GB/s\n", threads, *bw / 1e9);

  std::vector<std::string> bound_json;
  for (const Result& r : results) {
    if (r.phase != "decode" || r.batch != 1) continue;
    // Step i attends to prompt_len + i + 1 positions.
    const double avg_ctx = r.prompt_len + (steps + 1) / 2.0;
    const double kv_bytes = avg_ctx * static_cast<double>((*kv)->bytes_per_token());
    const double bytes = static_cast<double>(weight_bytes) + kv_bytes;
    const double bound = *bw / bytes;
    absl::PrintF(
        "decode B=1 P=%d: %.2f MB/token (weights %.2f MB + KV %.2f MB) -> bound %.1f tok/s; "
        "measured %.1f tok/s = %.1f%% of bound\n",
        r.prompt_len, bytes / 1e6, weight_bytes / 1e6, kv_bytes / 1e6, bound, r.tok_s,
        100.0 * r.tok_s / bound);
    bound_json.push_back(absl::StrFormat(
        "{\"prompt_len\":%d,\"bytes_per_token\":%.0f,\"weight_bytes\":%d,\"kv_bytes\":%.0f,"
        "\"bound_tok_s\":%.3f,\"tok_s\":%.3f,\"fraction\":%.4f}",
        r.prompt_len, bytes, weight_bytes, kv_bytes, bound, r.tok_s, r.tok_s / bound));
  }

  std::vector<std::string> rows;
  for (const Result& r : results) {
    rows.push_back(absl::StrFormat(
        "{\"phase\":\"%s\",\"batch\":%d,\"prompt_len\":%d,\"tokens\":%d,\"median_s\":%.6f,"
        "\"tok_s\":%.3f,\"best_tok_s\":%.3f}",
        r.phase, r.batch, r.prompt_len, r.tokens, r.median_s, r.tok_s, r.best_tok_s));
  }
  std::string escaped;
  for (char ch : path) {
    if (ch == '"' || ch == '\\') escaped.push_back('\\');
    escaped.push_back(ch);
  }
  const std::string json = absl::StrFormat(
      "{\"impl\":\"loom\",\"backend\":\"%s\",\"model\":\"%s\",\"threads\":%d,"
      "\"token_budget\":%d,\"decode_steps\":%d,\"runs\":%d,\"results\":[%s],"
      "\"read_bandwidth_bytes_s\":%.0f,\"bandwidth_bound\":[%s]}",
      backend->name(), escaped, threads, budget, steps, runs, absl::StrJoin(rows, ","), *bw,
      absl::StrJoin(bound_json, ","));
  absl::PrintF("%s\n", json);
  if (const std::string out = absl::GetFlag(FLAGS_json_out); !out.empty()) {
    FILE* f = std::fopen(out.c_str(), "w");
    if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot write ", out));
    std::fprintf(f, "%s\n", json.c_str());
    std::fclose(f);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = loom::Main();
  if (!s.ok()) {
    std::fprintf(stderr, "llama_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
