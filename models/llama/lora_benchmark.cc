// Multi-adapter decode throughput of LlamaModel with LoRA on the CPU (Punica's workloads).
// Not a test: run by scripts/bench_lora.sh.
//
// Setup: the real model; --batch synthetic rank --rank adapters on all seven projections of
// every layer (PEFT format, BF16, distinct seeds), written to a temporary directory and
// loaded with LoadPeftAdapter (the serving path), one at a time.
//
// Workloads (which adapter each of the --batch sequences uses; BatchPlan groups the
// sequences of one adapter into one SGMV segment):
//   none       no adapters (the base model, LoRA ops attached but never called)
//   identical  every sequence uses adapter 0
//   uniform    round(sqrt(batch)) adapters, equal popularity (sequence s -> s mod n)
//   skewed     Zipf(alpha 1.5) over --batch adapters, seeded (--zipf_seed)
//   distinct   sequence s -> adapter s
// One run of a workload: prefill --batch sequences of --prompt_len random tokens (steps of at
// most --token_budget tokens, SGMV, not timed), then --decode_steps steps in which every
// sequence decodes one token (greedy; one Forward per step), timed.
//   tok/s = batch * decode_steps / decode time; median of --runs runs. Runs are interleaved
//   over workloads (run r of every workload, then run r + 1) so that load on the machine
//   hits them alike.
//
// LoRA time: the model's LoraOps is a timing decorator around the real ops, so each SGMV
// shrink/expand call inside the real forward is timed (wall time per call, summed over the
// decode steps; per projection too). Per step = decode total / decode_steps.
// Adapter-bytes read time: distinct adapters of the workload x bytes per adapter (A and B of
// every projection, BF16) / read bandwidth -- the time to stream each distinct adapter's
// weights from DRAM once per step (SGMV's lower bound when adapters are cold). Read
// bandwidth: the same probe as llama_benchmark (--threads threads streaming a
// --bandwidth_mib buffer with AVX2 loads, best of 5), measured before and after the runs;
// the larger is used (the stricter bound).
//
// Gather-per-token baseline (Punica's BMM baseline): GatherLoraOps copies, for EVERY token,
// its adapter's A (shrink) and B (expand) into a contiguous per-token buffer and runs the
// same kernels on single-token segments. Measured on the adapter workloads with the same
// prompts; its decoded tokens must equal SGMV's (the kernels are batch-invariant), which the
// benchmark checks.
//
// Output: markdown tables on stdout and a JSON document (stdout's last line, and --json_out).

#include <immintrin.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/lora_ops.h"
#include "models/default_model.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/adapter_weights.h"
#include "models/llama/batch_plan.h"
#include "models/llama/llama_model.h"
#include "models/llama/bench_stats.h"
#include "models/llama/read_bandwidth.h"
#include "models/lora/lora_adapter.h"
#include "models/lora/peft_loader.h"
#include "models/lora/peft_writer.h"
#include "models/weights/model_source.h"
#include "nlohmann/json.hpp"
#include "scheduler/engine/lora_adapter_weights.h"

ABSL_FLAG(std::string, model, "", "GGUF file or HF directory (default: the default model)");
ABSL_FLAG(int, threads, 2, "CPU threads (backend, LoRA pool, bandwidth probe)");
ABSL_FLAG(int, lora_threads, -1,
          "-1: the LoRA ops share the backend's pool (as loomd and loom generate do); "
          "0 or 1: LoRA runs on the calling thread; N > 1: a separate pool of N threads");
ABSL_FLAG(int, batch, 32, "concurrent sequences (and adapters created)");
ABSL_FLAG(int, prompt_len, 32, "prompt tokens per sequence");
ABSL_FLAG(int, decode_steps, 32, "timed decode steps per run");
ABSL_FLAG(int, rank, 16, "LoRA rank of every adapter");
ABSL_FLAG(int, runs, 3, "measured runs per workload (median reported)");
ABSL_FLAG(int, token_budget, 512, "max tokens per prefill step");
ABSL_FLAG(bool, gather, true, "also measure the gather-per-token baseline");
ABSL_FLAG(int, bandwidth_mib, 1024, "buffer size of the read-bandwidth probe");
ABSL_FLAG(uint32_t, seed, 1, "prompt token seed");
ABSL_FLAG(uint32_t, zipf_seed, 42, "seed of the skewed workload's adapter draw");
ABSL_FLAG(std::string, json_out, "", "also write the JSON document to this file");

namespace loom {
namespace {

using bench::Argmax;
using bench::Clock;
using bench::Median;
using bench::Seconds;

// ---------------------------------------------------------------- LoraOps decorators

// Forwards every call to `inner` (switchable between runs) and sums the wall time of each
// call. Per-projection attribution: LlamaModel::ApplyLora calls SgmvShrink then SgmvExpand
// once per projection in the order q k v o gate up down of each layer, skipping a
// projection only when no segment has a pair; with adapters on all seven projections (as
// here) shrink call i of a Forward is projection i mod 7. Calls from one thread only.
class TimingLoraOps final : public kernels::LoraOps {
 public:
  explicit TimingLoraOps(kernels::LoraOps* inner) : inner_(inner) {}

  void set_inner(kernels::LoraOps* inner) { inner_ = inner; }
  std::string_view name() const override { return inner_->name(); }

  void SgmvShrink(const float* x, int h_in, const kernels::LoraSegment* segs, int n_segs,
                  float* v, int v_stride) override {
    proj_ = static_cast<int>(shrink_calls_++ % kNumProjections);
    ++calls_;
    const Clock::time_point t0 = Clock::now();
    inner_->SgmvShrink(x, h_in, segs, n_segs, v, v_stride);
    shrink_s_[proj_] += Seconds(t0, Clock::now());
  }

  void SgmvExpand(const float* v, int v_stride, const kernels::LoraSegment* segs, int n_segs,
                  int h_out, float* y) override {
    ++calls_;
    const Clock::time_point t0 = Clock::now();
    inner_->SgmvExpand(v, v_stride, segs, n_segs, h_out, y);
    expand_s_[proj_] += Seconds(t0, Clock::now());
  }

  void Bgmv(const float* x, int h_in, int n, const int32_t* idx, const kernels::LoraPair* loras,
            int h_out, float* v, int v_stride, float* y) override {
    ++calls_;
    const Clock::time_point t0 = Clock::now();
    inner_->Bgmv(x, h_in, n, idx, loras, h_out, v, v_stride, y);
    bgmv_s_ += Seconds(t0, Clock::now());
  }

  void Reset() {
    shrink_calls_ = 0;
    calls_ = 0;
    proj_ = 0;
    shrink_s_.fill(0);
    expand_s_.fill(0);
    bgmv_s_ = 0;
  }
  uint64_t calls() const { return calls_; }
  const std::array<double, kNumProjections>& shrink_s() const { return shrink_s_; }
  const std::array<double, kNumProjections>& expand_s() const { return expand_s_; }
  double total_s() const {
    double s = bgmv_s_;
    for (int p = 0; p < kNumProjections; ++p) s += shrink_s_[p] + expand_s_[p];
    return s;
  }

 private:
  kernels::LoraOps* inner_;
  uint64_t shrink_calls_ = 0;
  uint64_t calls_ = 0;  // all calls
  int proj_ = 0;
  std::array<double, kNumProjections> shrink_s_{}, expand_s_{};
  double bgmv_s_ = 0;
};

// Punica's gather-per-token (BMM) baseline: instead of one SGMV segment per adapter, every
// token's adapter weights are first copied into a contiguous per-token buffer -- A [rank,
// h_in] for the shrink, B [h_out, rank] for the expand -- and the inner ops run on
// single-token segments over those copies (so only the gather differs from SGMV: the same
// dot kernels, bitwise the same results). Tokens without an adapter are skipped. Buffers
// grow to the largest call and are reused.
class GatherLoraOps final : public kernels::LoraOps {
 public:
  explicit GatherLoraOps(kernels::LoraOps* inner) : inner_(inner) {}

  std::string_view name() const override { return "gather-per-token"; }

  void SgmvShrink(const float* x, int h_in, const kernels::LoraSegment* segs, int n_segs,
                  float* v, int v_stride) override {
    const int n = Gather(segs, n_segs, /*gather_a=*/true, h_in);
    inner_->SgmvShrink(x, h_in, tok_segs_.data(), n, v, v_stride);
  }

  void SgmvExpand(const float* v, int v_stride, const kernels::LoraSegment* segs, int n_segs,
                  int h_out, float* y) override {
    const int n = Gather(segs, n_segs, /*gather_a=*/false, h_out);
    inner_->SgmvExpand(v, v_stride, tok_segs_.data(), n, h_out, y);
  }

  void Bgmv(const float* x, int h_in, int n, const int32_t* idx, const kernels::LoraPair* loras,
            int h_out, float* v, int v_stride, float* y) override {
    inner_->Bgmv(x, h_in, n, idx, loras, h_out, v, v_stride, y);
  }

 private:
  // Fills tok_segs_ with one segment per token that has an adapter, each pointing at a
  // per-token pair whose A (gather_a) or B (otherwise) is a fresh copy in buf_; the other
  // matrix keeps pointing at the adapter (the call does not read it). `width` = h_in for A,
  // h_out for B. Returns the number of segments.
  int Gather(const kernels::LoraSegment* segs, int n_segs, bool gather_a, int width) {
    size_t elems = 0;
    int n_tok = 0;
    for (int s = 0; s < n_segs; ++s) {
      if (segs[s].lora == nullptr || segs[s].end <= segs[s].begin) continue;
      n_tok += segs[s].end - segs[s].begin;
      elems += static_cast<size_t>(segs[s].end - segs[s].begin) * segs[s].lora->rank * width;
    }
    if (buf_.size() < elems) buf_.resize(elems);
    if (pairs_.size() < static_cast<size_t>(n_tok)) pairs_.resize(n_tok);
    if (tok_segs_.size() < static_cast<size_t>(n_tok)) tok_segs_.resize(n_tok);
    uint16_t* dst = buf_.data();
    int i = 0;
    for (int s = 0; s < n_segs; ++s) {
      const kernels::LoraPair* src = segs[s].lora;
      if (src == nullptr || segs[s].end <= segs[s].begin) continue;
      const size_t n = static_cast<size_t>(src->rank) * width;
      for (int32_t t = segs[s].begin; t < segs[s].end; ++t, ++i) {
        std::memcpy(dst, gather_a ? src->a : src->b, n * sizeof(uint16_t));
        pairs_[i] = *src;
        (gather_a ? pairs_[i].a : pairs_[i].b) = dst;
        tok_segs_[i] = kernels::LoraSegment{t, t + 1, &pairs_[i]};
        dst += n;
      }
    }
    return n_tok;
  }

  kernels::LoraOps* inner_;
  std::vector<uint16_t> buf_;
  std::vector<kernels::LoraPair> pairs_;
  std::vector<kernels::LoraSegment> tok_segs_;
};

// ---------------------------------------------------------------- workloads

struct Workload {
  std::string name;
  std::vector<int> adapter_of_seq;  // [batch]; -1 = base model
  int distinct = 0;
};

int CountDistinct(const std::vector<int>& a) {
  std::vector<int> s;
  for (int x : a) {
    if (x >= 0) s.push_back(x);
  }
  std::sort(s.begin(), s.end());
  return static_cast<int>(std::unique(s.begin(), s.end()) - s.begin());
}

// none, identical, uniform, skewed, distinct over `batch` sequences and `batch` adapters.
std::vector<Workload> MakeWorkloads(int batch, uint32_t zipf_seed) {
  std::vector<Workload> w(5);
  w[0].name = "none";
  w[0].adapter_of_seq.assign(batch, -1);
  w[1].name = "identical";
  w[1].adapter_of_seq.assign(batch, 0);
  const int n_uniform = std::max(1, static_cast<int>(std::lround(std::sqrt(double(batch)))));
  w[2].name = absl::StrCat("uniform(", n_uniform, ")");
  for (int s = 0; s < batch; ++s) w[2].adapter_of_seq.push_back(s % n_uniform);
  w[3].name = "skewed";
  std::vector<double> weights(batch);
  for (int i = 0; i < batch; ++i) weights[i] = 1.0 / std::pow(i + 1, 1.5);
  std::mt19937 rng(zipf_seed);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  for (int s = 0; s < batch; ++s) w[3].adapter_of_seq.push_back(zipf(rng));
  w[4].name = "distinct";
  for (int s = 0; s < batch; ++s) w[4].adapter_of_seq.push_back(s);
  for (Workload& x : w) x.distinct = CountDistinct(x.adapter_of_seq);
  return w;
}

// Writes a seeded synthetic PEFT adapter to `dir`, loads it like the server does, and
// removes the files.
absl::StatusOr<std::unique_ptr<LoraAdapter>> MakeAdapter(const LlamaConfig& cfg, int rank,
                                                         uint64_t seed, const std::string& dir) {
  SyntheticAdapterSpec spec;
  spec.rank = rank;
  spec.alpha = 2.0f * rank;
  spec.seed = seed;
  spec.dtype = DType::kBF16;
  absl::StatusOr<SyntheticAdapter> syn = MakeSyntheticAdapter(cfg, spec);
  if (!syn.ok()) return syn.status();
  if (absl::Status st = WritePeftAdapter(*syn, dir); !st.ok()) return st;
  absl::StatusOr<std::unique_ptr<LoraAdapter>> a = LoadPeftAdapter(dir, cfg, AdapterLimits());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return a;
}

// ---------------------------------------------------------------- runs

struct RunResult {
  double decode_s = 0;
  double lora_s = 0;
  uint64_t lora_calls = 0;
  std::array<double, kNumProjections> shrink_s{}, expand_s{};
  std::vector<std::vector<int32_t>> generated;  // [batch][decode_steps]
};

class Runner {
 public:
  Runner(const LlamaModel* model, PagedKvCache* kv, TimingLoraOps* timer,
         kernels::LoraOps* sgmv, int token_budget, int decode_steps)
      : model_(model), kv_(kv), timer_(timer), sgmv_(sgmv), budget_(token_budget),
        steps_(decode_steps) {}

  // Prefills `prompts` with SGMV (untimed), then decodes with `decode_ops` timed; sequence s
  // uses adapters[s] (nullptr: base). Releases the sequences after.
  absl::StatusOr<RunResult> Run(const std::vector<std::vector<int32_t>>& prompts,
                                const std::vector<const AdapterWeights*>& adapters,
                                kernels::LoraOps* decode_ops) {
    const int B = static_cast<int>(prompts.size());
    std::vector<int32_t> seqs(B), next(B);
    for (int s = 0; s < B; ++s) {
      seqs[s] = kv_->NewSequence();
      absl::Status st =
          kv_->Reserve(seqs[s], static_cast<int32_t>(prompts[s].size()) + steps_);
      if (!st.ok()) return st;
    }
    RunResult r;
    timer_->set_inner(sgmv_);
    absl::Status st = Prefill(prompts, adapters, seqs, &next);
    if (st.ok()) {
      timer_->set_inner(decode_ops);
      timer_->Reset();
      st = Decode(prompts, adapters, seqs, &next, &r);
      r.lora_s = timer_->total_s();
      r.lora_calls = timer_->calls();
      r.shrink_s = timer_->shrink_s();
      r.expand_s = timer_->expand_s();
      timer_->set_inner(sgmv_);
    }
    for (int32_t s : seqs) kv_->Release(s);
    if (!st.ok()) return st;
    return r;
  }

 private:
  // Runs `chunks` as one step; the argmax of chunk c's last logits row goes to
  // (*next)[owner[c]].
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
      if (r1 > r0) {
        (*next)[owner[c]] = Argmax(logits_.data() + static_cast<size_t>(r1 - 1) * vocab, vocab);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Prefill(const std::vector<std::vector<int32_t>>& prompts,
                       const std::vector<const AdapterWeights*>& adapters,
                       const std::vector<int32_t>& seqs, std::vector<int32_t>* next) {
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
        c.adapter = adapters[s];
        chunks.push_back(std::move(c));
        owner.push_back(static_cast<int>(s));
        pos += take;
        in_step += take;
        if (in_step == budget_) {
          if (absl::Status st = Step(chunks, owner, next); !st.ok()) return st;
          chunks.clear();
          owner.clear();
          in_step = 0;
        }
      }
    }
    if (!chunks.empty()) return Step(chunks, owner, next);
    return absl::OkStatus();
  }

  absl::Status Decode(const std::vector<std::vector<int32_t>>& prompts,
                      const std::vector<const AdapterWeights*>& adapters,
                      const std::vector<int32_t>& seqs, std::vector<int32_t>* next,
                      RunResult* r) {
    const int B = static_cast<int>(prompts.size());
    std::vector<int> owner(B);
    for (int s = 0; s < B; ++s) owner[s] = s;
    std::vector<SequenceChunk> chunks(B);
    r->generated.assign(B, {});
    const Clock::time_point t0 = Clock::now();
    for (int step = 0; step < steps_; ++step) {
      for (int s = 0; s < B; ++s) {
        chunks[s].kv_seq = seqs[s];
        chunks[s].start_pos = static_cast<int32_t>(prompts[s].size()) + step;
        chunks[s].tokens.assign(1, (*next)[s]);
        chunks[s].logits = SequenceChunk::Logits::kLast;
        chunks[s].adapter = adapters[s];
      }
      if (absl::Status st = Step(chunks, owner, next); !st.ok()) return st;
      for (int s = 0; s < B; ++s) r->generated[s].push_back((*next)[s]);
    }
    r->decode_s = Seconds(t0, Clock::now());
    return absl::OkStatus();
  }

  const LlamaModel* model_;
  PagedKvCache* kv_;
  TimingLoraOps* timer_;
  kernels::LoraOps* sgmv_;
  const int budget_;
  const int steps_;
  ForwardWorkspace ws_;
  std::vector<float> logits_;
};

// Medians over runs of one (workload, ops) configuration.
struct Measured {
  bool present = false;
  double tok_s = 0;
  double step_ms = 0;
  double lora_ms = 0;  // per decode step
  double lora_calls = 0;  // per decode step
  std::array<double, kNumProjections> shrink_ms{}, expand_ms{};  // per decode step
  std::vector<double> tok_s_runs, lora_ms_runs;
  std::vector<std::vector<int32_t>> generated;  // of the last run
};

Measured Summarise(const std::vector<RunResult>& runs, int batch, int steps) {
  Measured m;
  m.present = true;
  std::vector<double> dec;
  std::array<std::vector<double>, kNumProjections> sh, ex;
  for (const RunResult& r : runs) {
    dec.push_back(r.decode_s);
    m.tok_s_runs.push_back(batch * steps / r.decode_s);
    m.lora_ms_runs.push_back(1e3 * r.lora_s / steps);
    for (int p = 0; p < kNumProjections; ++p) {
      sh[p].push_back(1e3 * r.shrink_s[p] / steps);
      ex[p].push_back(1e3 * r.expand_s[p] / steps);
    }
  }
  const double md = Median(dec);
  m.tok_s = batch * steps / md;
  m.step_ms = 1e3 * md / steps;
  m.lora_ms = Median(m.lora_ms_runs);
  for (int p = 0; p < kNumProjections; ++p) {
    m.shrink_ms[p] = Median(sh[p]);
    m.expand_ms[p] = Median(ex[p]);
  }
  m.generated = runs.back().generated;
  m.lora_calls = double(runs.back().lora_calls) / steps;
  return m;
}

constexpr const char* kProjNames[kNumProjections] = {"q", "k", "v", "o", "gate", "up", "down"};

absl::Status Main() {
  const int threads = absl::GetFlag(FLAGS_threads);
  const int batch = absl::GetFlag(FLAGS_batch);
  const int prompt_len = absl::GetFlag(FLAGS_prompt_len);
  const int steps = absl::GetFlag(FLAGS_decode_steps);
  const int rank = absl::GetFlag(FLAGS_rank);
  const int runs = absl::GetFlag(FLAGS_runs);
  const int budget = absl::GetFlag(FLAGS_token_budget);
  const bool gather = absl::GetFlag(FLAGS_gather);
  if (threads < 1 || batch < 1 || prompt_len < 1 || steps < 1 || rank < 1 || runs < 1 ||
      budget < 1) {
    return absl::InvalidArgumentError(
        "--threads, --batch, --prompt_len, --decode_steps, --rank, --runs, --token_budget "
        "must be >= 1");
  }
  std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty()) path = DefaultModelPath();

  // Bandwidth first, while nothing of ours is running.
  const size_t bw_bytes = size_t(absl::GetFlag(FLAGS_bandwidth_mib)) << 20;
  absl::StatusOr<double> bw_before = MeasureReadBandwidth(bw_bytes, threads, 5);
  if (!bw_before.ok()) return bw_before.status();

  // By default one pool serves the dense and the LoRA kernels, as in the server
  // (server/serving_model.cc): two pools on the same cores steal each other's time.
  kernels::ThreadPool shared_pool(threads);
  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackendOnPool(&shared_pool);
  if (backend == nullptr) return absl::InternalError("CreateCpuBackend failed");
  const int lora_threads = absl::GetFlag(FLAGS_lora_threads);
  std::unique_ptr<kernels::ThreadPool> lora_pool;
  if (lora_threads > 1) lora_pool = std::make_unique<kernels::ThreadPool>(lora_threads);
  kernels::ThreadPool* lora_on =
      lora_threads < 0 ? &shared_pool : lora_pool.get();  // null: calling thread
  std::unique_ptr<kernels::LoraOps> sgmv = kernels::CreateCpuLoraOps(lora_on);
  GatherLoraOps gather_ops(sgmv.get());
  TimingLoraOps timer(sgmv.get());

  absl::StatusOr<std::unique_ptr<ModelSource>> src = ModelSource::Open(path);
  if (!src.ok()) return src.status();
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Create(*std::move(src), backend.get(), &timer);
  if (!model.ok()) return model.status();
  const LlamaConfig& cfg = (*model)->config();

  // Adapters.
  char tmpl[] = "/tmp/lora_benchmark.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::UnavailableError("mkdtemp failed");
  const std::string tmp_root = tmpl;
  std::vector<std::unique_ptr<LoraAdapter>> adapters;
  std::vector<std::unique_ptr<LoraAdapterWeights>> views;
  const Clock::time_point load0 = Clock::now();
  for (int i = 0; i < batch; ++i) {
    absl::StatusOr<std::unique_ptr<LoraAdapter>> a =
        MakeAdapter(cfg, rank, 1000 + i, absl::StrCat(tmp_root, "/a", i));
    if (!a.ok()) {
      std::error_code ec;
      std::filesystem::remove_all(tmp_root, ec);
      return a.status();
    }
    views.push_back(std::make_unique<LoraAdapterWeights>(a->get()));
    adapters.push_back(*std::move(a));
  }
  {
    std::error_code ec;
    std::filesystem::remove_all(tmp_root, ec);
  }
  const double load_s = Seconds(load0, Clock::now());
  const size_t adapter_bytes = adapters[0]->bytes();

  KvCacheOptions kvo;
  kvo.n_pages = (prompt_len + steps + kvo.page_size - 1) / kvo.page_size * batch;
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv = PagedKvCache::Create(cfg, kvo);
  if (!kv.ok()) return kv.status();

  std::mt19937 rng(absl::GetFlag(FLAGS_seed));
  std::vector<std::vector<int32_t>> prompts(batch, std::vector<int32_t>(prompt_len));
  for (auto& p : prompts) {
    for (int32_t& t : p) t = 3 + static_cast<int32_t>(rng() % std::min(49000, cfg.vocab_size - 3));
  }

  const std::vector<Workload> workloads = MakeWorkloads(batch, absl::GetFlag(FLAGS_zipf_seed));
  // Configurations: every workload with SGMV, and (with --gather) every adapter workload
  // with the gather baseline.
  struct Cfg {
    int workload;
    bool gather;
  };
  std::vector<Cfg> cfgs;
  for (int w = 0; w < static_cast<int>(workloads.size()); ++w) cfgs.push_back({w, false});
  if (gather) {
    for (int w = 1; w < static_cast<int>(workloads.size()); ++w) cfgs.push_back({w, true});
  }
  auto adapters_of = [&](const Workload& w) {
    std::vector<const AdapterWeights*> out(batch, nullptr);
    for (int s = 0; s < batch; ++s) {
      if (w.adapter_of_seq[s] >= 0) out[s] = views[w.adapter_of_seq[s]].get();
    }
    return out;
  };

  Runner runner(model->get(), kv->get(), &timer, sgmv.get(), budget, steps);
  // One warm-up run of each configuration (grows workspaces and gather buffers, faults in
  // the adapters), then --runs rounds over all configurations.
  std::vector<std::vector<RunResult>> results(cfgs.size());
  const Clock::time_point bench0 = Clock::now();
  for (int round = -1; round < runs; ++round) {
    for (size_t c = 0; c < cfgs.size(); ++c) {
      kernels::LoraOps* ops = cfgs[c].gather ? static_cast<kernels::LoraOps*>(&gather_ops)
                                             : sgmv.get();
      absl::StatusOr<RunResult> r =
          runner.Run(prompts, adapters_of(workloads[cfgs[c].workload]), ops);
      if (!r.ok()) return r.status();
      if (round >= 0) results[c].push_back(*std::move(r));
    }
  }
  const double bench_s = Seconds(bench0, Clock::now());

  absl::StatusOr<double> bw_after = MeasureReadBandwidth(bw_bytes, threads, 5);
  if (!bw_after.ok()) return bw_after.status();
  const double bw = std::max(*bw_before, *bw_after);

  std::vector<Measured> sg(workloads.size()), ga(workloads.size());
  for (size_t c = 0; c < cfgs.size(); ++c) {
    (cfgs[c].gather ? ga : sg)[cfgs[c].workload] = Summarise(results[c], batch, steps);
  }

  // Checks: the gather baseline decodes the same tokens as SGMV (batch invariance), and the
  // adapters change the output (so LoRA really ran).
  bool gather_matches = true;
  for (size_t w = 1; w < workloads.size(); ++w) {
    if (ga[w].present && ga[w].generated != sg[w].generated) gather_matches = false;
  }
  int changed_seqs = 0;  // of the distinct workload vs none
  for (int s = 0; s < batch; ++s) {
    if (sg[4].generated[s] != sg[0].generated[s]) ++changed_seqs;
  }

  // ---- output
  const double base_tok_s = sg[0].tok_s;
  absl::PrintF(
      "Loom LoRA decode: %s backend (%d threads) + %s LoRA ops (%s); %d sequences x %d prompt "
      "tokens, %d decode steps, rank %d on all 7 projections x %d layers; median of %d runs\n",
      backend->name(), threads, sgmv->name(),
      lora_threads < 0   ? std::string("shared pool")
      : lora_pool        ? absl::StrCat("own pool of ", lora_threads, " threads")
                         : std::string("no pool, 1 thread"),
      batch, prompt_len, steps, rank, cfg.n_layers, runs);
  absl::PrintF(
      "adapter: %.2f MB (BF16 A+B); read bandwidth (%d threads, AVX2 stream): %.2f GB/s before, "
      "%.2f GB/s after (using %.2f); adapters made+loaded in %.1f s, benchmark %.1f s\n",
      adapter_bytes / 1e6, threads, *bw_before / 1e9, *bw_after / 1e9, bw / 1e9, load_s, bench_s);
  absl::PrintF("\n");
  absl::PrintF(
      "| workload | distinct | tok/s | vs none | step ms | LoRA ms/step | LoRA us/call | "
      "adapter-bytes read ms | LoRA / read | gather tok/s | gather LoRA ms/step | SGMV speedup "
      "vs gather |\n");
  absl::PrintF("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  nlohmann::json rows = nlohmann::json::array();
  for (size_t w = 0; w < workloads.size(); ++w) {
    const Workload& wl = workloads[w];
    const Measured& m = sg[w];
    const double read_ms = 1e3 * wl.distinct * static_cast<double>(adapter_bytes) / bw;
    std::string ratio = "-", gtok = "-", glora = "-", speed = "-";
    if (wl.distinct > 0) ratio = absl::StrFormat("%.2f", m.lora_ms / read_ms);
    if (ga[w].present) {
      gtok = absl::StrFormat("%.1f", ga[w].tok_s);
      glora = absl::StrFormat("%.2f", ga[w].lora_ms);
      speed = absl::StrFormat("%.2fx", ga[w].lora_ms / m.lora_ms);
    }
    const std::string per_call =
        m.lora_calls > 0 ? absl::StrFormat("%.1f", 1e3 * m.lora_ms / m.lora_calls) : "-";
    absl::PrintF("| %s | %d | %.1f | %.3f | %.1f | %.2f | %s | %.2f | %s | %s | %s | %s |\n",
                 wl.name, wl.distinct, m.tok_s, m.tok_s / base_tok_s, m.step_ms, m.lora_ms,
                 per_call, read_ms, ratio, gtok, glora, speed);
    nlohmann::json row = {{"workload", wl.name},
                          {"distinct_adapters", wl.distinct},
                          {"adapter_of_seq", wl.adapter_of_seq},
                          {"tok_s", m.tok_s},
                          {"tok_s_runs", m.tok_s_runs},
                          {"ratio_to_none", m.tok_s / base_tok_s},
                          {"step_ms", m.step_ms},
                          {"lora_ms_per_step", m.lora_ms},
                          {"lora_ms_per_step_runs", m.lora_ms_runs},
                          {"lora_calls_per_step", m.lora_calls},
                          {"adapter_bytes_read_ms", read_ms},
                          {"shrink_ms_per_step", m.shrink_ms},
                          {"expand_ms_per_step", m.expand_ms}};
    if (ga[w].present) {
      row["gather"] = {{"tok_s", ga[w].tok_s},
                       {"tok_s_runs", ga[w].tok_s_runs},
                       {"lora_ms_per_step", ga[w].lora_ms},
                       {"lora_ms_per_step_runs", ga[w].lora_ms_runs},
                       {"shrink_ms_per_step", ga[w].shrink_ms},
                       {"expand_ms_per_step", ga[w].expand_ms}};
    }
    rows.push_back(row);
  }

  // Where the LoRA time goes: per projection, SGMV shrink/expand ms per step and the
  // adapter bytes that projection reads per step (distinct adapters x layers x rank x width
  // x 2), as an effective read rate.
  absl::PrintF("\nSGMV time per decode step by projection (ms; GB/s = adapter bytes read / time)\n");
  absl::PrintF("| workload | proj | h_in->h_out | shrink ms | shrink GB/s | expand ms | expand GB/s |\n");
  absl::PrintF("|---|---|---|---:|---:|---:|---:|\n");
  for (size_t w = 1; w < workloads.size(); ++w) {
    if (workloads[w].name != "identical" && workloads[w].name != "distinct") continue;
    for (int p = 0; p < kNumProjections; ++p) {
      const ProjectionShape sh = BaseProjectionShape(cfg, static_cast<LoraTarget>(p));
      const double a_bytes = double(workloads[w].distinct) * cfg.n_layers * rank * sh.h_in * 2;
      const double b_bytes = double(workloads[w].distinct) * cfg.n_layers * rank * sh.h_out * 2;
      absl::PrintF("| %s | %s | %d->%d | %.2f | %.1f | %.2f | %.1f |\n", workloads[w].name,
                   kProjNames[p], sh.h_in, sh.h_out, sg[w].shrink_ms[p],
                   a_bytes / (sg[w].shrink_ms[p] * 1e6), sg[w].expand_ms[p],
                   b_bytes / (sg[w].expand_ms[p] * 1e6));
    }
  }
  absl::PrintF("\nchecks: gather tokens == SGMV tokens: %s; distinct adapters changed %d/%d "
               "sequences' greedy output vs none\n",
               gather_matches ? "yes" : "NO", changed_seqs, batch);

  std::string model_name = path.substr(path.find_last_of('/') + 1);
  nlohmann::json doc = {{"impl", "loom"},
                        {"benchmark", "lora_decode"},
                        {"backend", backend->name()},
                        {"lora_ops", std::string(sgmv->name())},
                        {"model", model_name},
                        {"threads", threads},
                        {"lora_threads", lora_threads},
                        {"batch", batch},
                        {"prompt_len", prompt_len},
                        {"decode_steps", steps},
                        {"rank", rank},
                        {"runs", runs},
                        {"adapter_bytes", adapter_bytes},
                        {"read_bandwidth_bytes_s", bw},
                        {"read_bandwidth_before", *bw_before},
                        {"read_bandwidth_after", *bw_after},
                        {"gather_tokens_match_sgmv", gather_matches},
                        {"distinct_changed_sequences", changed_seqs},
                        {"results", rows}};
  const std::string json = doc.dump();
  absl::PrintF("%s\n", json);
  if (const std::string out = absl::GetFlag(FLAGS_json_out); !out.empty()) {
    FILE* f = std::fopen(out.c_str(), "w");
    if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot write ", out));
    std::fprintf(f, "%s\n", json.c_str());
    std::fclose(f);
  }
  if (!gather_matches) {
    return absl::InternalError("the gather baseline decoded different tokens than SGMV");
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = loom::Main();
  if (!s.ok()) {
    std::fprintf(stderr, "lora_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
