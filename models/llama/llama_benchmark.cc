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

using bench::Argmax;
using bench::Clock;
using bench::Median;
using bench::Seconds;

// ---------------------------------------------------------------- model runs

struct Config {
  int batch = 0;
  int prompt_len = 0;
};

absl::StatusOr<std::vector<Config>> ParseConfigs(const std::string& text) {
  std::vector<Config> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> bp = absl::StrSplit(item, absl::ByAnyChar("xX"));
    Config c;
    if (bp.size() != 2 || !absl::SimpleAtoi(bp[0], &c.batch) ||
        !absl::SimpleAtoi(bp[1], &c.prompt_len) || c.batch < 1 || c.prompt_len < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad --configs item '", item, "'"));
    }
    out.push_back(c);
  }
  if (out.empty()) return absl::InvalidArgumentError("--configs is empty");
  return out;
}

struct RunTimes {
  double prefill_s = 0;
  double decode_s = 0;
};

class Runner {
 public:
  Runner(const LlamaModel* model, PagedKvCache* kv, int token_budget, int decode_steps)
      : model_(model), kv_(kv), budget_(token_budget), steps_(decode_steps) {}

  // Prefills `prompts` (one sequence each) and decodes; releases the sequences after.
  absl::StatusOr<RunTimes> Run(const std::vector<std::vector<int32_t>>& prompts) {
    const int B = static_cast<int>(prompts.size());
    std::vector<int32_t> seqs(B), next(B);
    for (int s = 0; s < B; ++s) {
      seqs[s] = kv_->NewSequence();
      absl::Status st =
          kv_->Reserve(seqs[s], static_cast<int32_t>(prompts[s].size()) + steps_);
      if (!st.ok()) return st;
    }
    RunTimes times;
    absl::Status st = Prefill(prompts, seqs, &next, &times.prefill_s);
    if (st.ok()) st = Decode(prompts, seqs, &next, &times.decode_s);
    for (int32_t s : seqs) kv_->Release(s);
    if (!st.ok()) return st;
    return times;
  }

 private:
  // Runs `chunks` as one step and writes the argmax of each logits row to the chunk's
  // sequence in `next` (chunks[c].kv_seq -> next[owner[c]]).
  absl::Status Step(const std::vector<SequenceChunk>& chunks, const std::vector<int>& owner,
                    std::vector<int32_t>* next) {
    const int vocab = model_->config().vocab_size;
    absl::StatusOr<BatchPlan> plan = BatchPlan::Build(chunks, *kv_, vocab);
    if (!plan.ok()) return plan.status();
    logits_.resize(plan->logit_tokens().size() * static_cast<size_t>(vocab));
    absl::Status st = model_->Forward(*plan, kv_, &ws_, logits_.data());
    if (!st.ok()) return st;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const auto [r0, r1] = plan->logit_rows(c);
      if (r1 > r0) (*next)[owner[c]] = Argmax(logits_.data() + static_cast<size_t>(r1 - 1) * vocab, vocab);
    }
    return absl::OkStatus();
  }

  absl::Status Prefill(const std::vector<std::vector<int32_t>>& prompts,
                       const std::vector<int32_t>& seqs, std::vector<int32_t>* next,
                       double* seconds) {
    const Clock::time_point t0 = Clock::now();
    std::vector<SequenceChunk> chunks;
    std::vector<int> owner;
    int in_step = 0;
    for (size_t s = 0; s < prompts.size(); ++s) {
      const int P = static_cast<int>(prompts[s].size());
      for (int pos = 0; pos < P;) {
        const int take = std::min(P - pos, budget_ - in_step);
        SequenceChunk c;
        c.kv_seq = seqs[s];
        c.start_pos = pos;
        c.tokens.assign(prompts[s].begin() + pos, prompts[s].begin() + pos + take);
        c.logits = pos + take == P ? SequenceChunk::Logits::kLast : SequenceChunk::Logits::kNone;
        chunks.push_back(std::move(c));
        owner.push_back(static_cast<int>(s));
        pos += take;
        in_step += take;
        if (in_step == budget_) {
          absl::Status st = Step(chunks, owner, next);
          if (!st.ok()) return st;
          chunks.clear();
          owner.clear();
          in_step = 0;
        }
      }
    }
    if (!chunks.empty()) {
      absl::Status st = Step(chunks, owner, next);
      if (!st.ok()) return st;
    }
    *seconds = Seconds(t0, Clock::now());
    return absl::OkStatus();
  }

  absl::Status Decode(const std::vector<std::vector<int32_t>>& prompts,
                      const std::vector<int32_t>& seqs, std::vector<int32_t>* next,
                      double* seconds) {
    const int B = static_cast<int>(prompts.size());
    std::vector<int> owner(B);
    for (int s = 0; s < B; ++s) owner[s] = s;
    std::vector<SequenceChunk> chunks(B);
    const Clock::time_point t0 = Clock::now();
    for (int step = 0; step < steps_; ++step) {
      for (int s = 0; s < B; ++s) {
        chunks[s].kv_seq = seqs[s];
        chunks[s].start_pos = static_cast<int32_t>(prompts[s].size()) + step;
        chunks[s].tokens.assign(1, (*next)[s]);
        chunks[s].logits = SequenceChunk::Logits::kLast;
      }
      absl::Status st = Step(chunks, owner, next);
      if (!st.ok()) return st;
    }
    *seconds = Seconds(t0, Clock::now());
    return absl::OkStatus();
  }

  const LlamaModel* model_;
  PagedKvCache* kv_;
  const int budget_;
  const int steps_;
  ForwardWorkspace ws_;
  std::vector<float> logits_;
};

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
  int32_t pages = 0;
  for (const Config& c : *configs) {
    const int32_t per_seq = (c.prompt_len + steps + kvo.page_size - 1) / kvo.page_size;
    pages = std::max(pages, per_seq * c.batch);
  }
  kvo.n_pages = pages;
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv = PagedKvCache::Create(cfg, kvo);
  if (!kv.ok()) return kv.status();

  Runner runner(model->get(), kv->get(), budget, steps);
  std::mt19937 rng(absl::GetFlag(FLAGS_seed));
  std::vector<Result> results;
  for (const Config& c : *configs) {
    std::vector<std::vector<int32_t>> prompts(c.batch, std::vector<int32_t>(c.prompt_len));
    for (auto& p : prompts) {
      for (int32_t& t : p) t = 3 + static_cast<int32_t>(rng() % std::min(49000, cfg.vocab_size - 3));
    }
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
