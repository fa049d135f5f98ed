// Throughput of every quantization scheme against the unquantized paths, in one run: the
// stored base model (GGUF Q4_1 weights, int8 activations), the FP32 path (every weight
// dequantized to F32) and each quantized checkpoint given (W8A8 / W4A8 / W4A4 with
// outliers, optionally run with another activation precision). Not a test.
//
//   quant_benchmark --quantized DIR[:SCHEME][:int8_head],... [--model PATH] [--interleave]
//                   [--configs 1x128,8x128,32x128] [--decode_steps 32] [--runs 3]
//                   [--threads 2] [--token_budget 512] [--json_out FILE] [--int8_head]
//                   [--profile]
//
// Per model and configuration BxP: prefill tokens/s and aggregate decode tokens/s, measured
// by bench::Runner (models/llama/bench_runner.h) exactly as llama_benchmark does, so
// scripts/bench_llamacpp.py with the same --configs/--decode_steps/--token_budget gives
// llama.cpp's figures on its Q4_1 file. One warm-up run, then the median of --runs (the
// fastest run too). Models are loaded one at a time, or all at once with --interleave,
// whose runs alternate between the models (one run of each per round) and which prints
// each round's decode ratio to f32: the machine's drift then hits every model alike.
// DIR:int8_head runs that checkpoint with the INT8 output head (--int8_head: all of them).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/kv_quant.h"
#include "models/eval/eval_model.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/bench_runner.h"
#include "models/llama/bench_stats.h"

ABSL_FLAG(std::string, model, "", "base GGUF file (default: the default model)");
ABSL_FLAG(std::string, quantized, "",
          "comma-separated checkpoint directories, each optionally DIR:SCHEME (override)");
ABSL_FLAG(bool, stored, true, "measure the stored (Q4_1) path");
ABSL_FLAG(bool, f32, true, "measure the FP32 path");
ABSL_FLAG(std::string, configs, "1x128,8x128,32x128", "comma-separated BxP");
ABSL_FLAG(int, decode_steps, 32, "decode steps after each prefill");
ABSL_FLAG(int, runs, 3, "measured runs per configuration (median reported)");
ABSL_FLAG(int, threads, 2, "CPU threads");
ABSL_FLAG(int, token_budget, 512, "max tokens per prefill step");
ABSL_FLAG(uint32_t, seed, 1, "prompt token seed");
ABSL_FLAG(std::string, kv_cache_dtype, "f16", "KV cache rows: f16, int8 or int4");
ABSL_FLAG(std::string, json_out, "", "also write the JSON line to this file");
ABSL_FLAG(bool, int8_head, false,
          "run every quantized checkpoint's output head as INT8 Atom linear (quantized_head.h)");
ABSL_FLAG(bool, interleave, false,
          "load every model at once and alternate their runs (one run of each per round), so "
          "each sees the same stretch of machine time; also prints each round's decode ratio "
          "to f32");
ABSL_FLAG(bool, profile, false,
          "print each model's decode time per operation (measured runs of each config)");

namespace loom {
namespace {

struct Row {
  std::string name;
  int batch = 0, prompt_len = 0;
  double prefill_tok_s = 0, decode_tok_s = 0, best_prefill = 0, best_decode = 0;
  std::vector<double> decode_s;  // every measured run, in order
};

// One model under measurement: its kernels, KV cache and runner.
struct Subject {
  std::string name;
  std::unique_ptr<EvalModel> model;
  std::unique_ptr<PagedKvCache> kv;
  std::unique_ptr<bench::Runner> runner;
  StepProfile profile;
};

absl::StatusOr<std::unique_ptr<Subject>> Load(const std::string& name, const EvalModelOptions& o,
                                              const std::vector<bench::Config>& configs,
                                              kernels::ThreadPool* pool) {
  auto s = std::make_unique<Subject>();
  s->name = name;
  absl::StatusOr<std::unique_ptr<EvalModel>> m = LoadEvalModel(o, pool);
  if (!m.ok()) return m.status();
  s->model = *std::move(m);
  const LlamaModel& model = *s->model->model;
  const int steps = absl::GetFlag(FLAGS_decode_steps);
  KvCacheOptions kvo;
  absl::StatusOr<kernels::KvDtype> kv_dtype =
      kernels::ParseKvDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) return kv_dtype.status();
  kvo.dtype = *kv_dtype;
  kvo.n_pages = bench::PagesFor(configs, steps, kvo.page_size);
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv = PagedKvCache::Create(model.config(), kvo);
  if (!kv.ok()) return kv.status();
  s->kv = *std::move(kv);
  s->runner = std::make_unique<bench::Runner>(&model, s->kv.get(),
                                              absl::GetFlag(FLAGS_token_budget), steps);
  std::fprintf(stderr, "%s: %s\n", name.c_str(), s->model->description.c_str());
  return s;
}

// Measures config `ci` of every subject: one warm-up run each, then --runs rounds of one
// run of each subject (with a single subject: its runs back to back), so that subjects
// measured together see the same stretch of machine time.
absl::Status MeasureConfig(const std::vector<std::unique_ptr<Subject>>& subjects,
                           const std::vector<bench::Config>& configs, size_t ci,
                           std::vector<Row>* rows) {
  const bench::Config& c = configs[ci];
  const int steps = absl::GetFlag(FLAGS_decode_steps), runs = absl::GetFlag(FLAGS_runs);
  const bool profile = absl::GetFlag(FLAGS_profile);
  std::vector<std::vector<std::vector<int32_t>>> prompts;
  std::vector<std::vector<double>> pre(subjects.size()), dec(subjects.size());
  auto run_once = [&](size_t i, bool measured) -> absl::Status {
    Subject& s = *subjects[i];
    s.runner->set_decode_profile(measured && profile ? &s.profile : nullptr);
    absl::StatusOr<bench::RunTimes> t = s.runner->Run(prompts[i]);
    s.runner->set_decode_profile(nullptr);
    if (!t.ok()) return t.status();
    if (measured) {
      pre[i].push_back(t->prefill_s);
      dec[i].push_back(t->decode_s);
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < subjects.size(); ++i) {
    prompts.push_back(bench::RandomPrompts(c, subjects[i]->model->model->config().vocab_size,
                                           absl::GetFlag(FLAGS_seed) + static_cast<uint32_t>(ci)));
    subjects[i]->profile.Clear();
  }
  for (size_t i = 0; i < subjects.size(); ++i) {
    if (absl::Status st = run_once(i, false); !st.ok()) return st;
  }
  for (int r = 0; r < runs; ++r) {
    for (size_t i = 0; i < subjects.size(); ++i) {
      if (absl::Status st = run_once(i, true); !st.ok()) return st;
    }
  }
  for (size_t i = 0; i < subjects.size(); ++i) {
    Row row{subjects[i]->name, c.batch, c.prompt_len};
    const double pt = static_cast<double>(c.batch) * c.prompt_len;
    const double dt = static_cast<double>(c.batch) * steps;
    row.prefill_tok_s = pt / bench::Median(pre[i]);
    row.decode_tok_s = dt / bench::Median(dec[i]);
    row.best_prefill = pt / *std::min_element(pre[i].begin(), pre[i].end());
    row.best_decode = dt / *std::min_element(dec[i].begin(), dec[i].end());
    row.decode_s = dec[i];
    std::fprintf(stderr, "  %s %dx%d prefill %.1f tok/s, decode %.1f tok/s\n",
                 subjects[i]->name.c_str(), c.batch, c.prompt_len, row.prefill_tok_s,
                 row.decode_tok_s);
    if (profile) {
      std::fprintf(stderr, "  decode profile (%s, %dx%d):\n%s", subjects[i]->name.c_str(),
                   c.batch, c.prompt_len, subjects[i]->profile.Table().c_str());
    }
    rows->push_back(std::move(row));
  }
  return absl::OkStatus();
}

absl::Status Main() {
  absl::StatusOr<std::vector<bench::Config>> configs =
      bench::ParseConfigs(absl::GetFlag(FLAGS_configs));
  if (!configs.ok()) return configs.status();
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 1 || absl::GetFlag(FLAGS_runs) < 1 || absl::GetFlag(FLAGS_decode_steps) < 1) {
    return absl::InvalidArgumentError("--threads, --runs, --decode_steps >= 1");
  }
  kernels::ThreadPool pool(threads);
  EvalModelOptions base;
  base.model_path = absl::GetFlag(FLAGS_model);
  std::vector<std::pair<std::string, EvalModelOptions>> specs;
  if (absl::GetFlag(FLAGS_stored)) specs.emplace_back("q4_1", base);
  if (absl::GetFlag(FLAGS_f32)) {
    EvalModelOptions o = base;
    o.f32 = true;
    specs.emplace_back("f32", o);
  }
  for (absl::string_view item :
       absl::StrSplit(absl::GetFlag(FLAGS_quantized), ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    EvalModelOptions o = base;
    o.quantized_dir = parts[0];
    o.int8_head = absl::GetFlag(FLAGS_int8_head);
    std::string name = parts[0];
    if (size_t slash = name.find_last_of('/'); slash != std::string::npos) {
      name = name.substr(slash + 1);
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i] == "int8_head") {
        o.int8_head = true;
      } else {
        o.scheme_override = parts[i];
        name = absl::StrCat(name, "->", parts[i]);
      }
    }
    if (o.int8_head) name = absl::StrCat(name, "+h8");
    specs.emplace_back(name, o);
  }
  std::vector<Row> rows;
  const bool interleave = absl::GetFlag(FLAGS_interleave);
  if (interleave) {  // every model loaded at once; runs alternate between them
    std::vector<std::unique_ptr<Subject>> subjects;
    for (const auto& [name, o] : specs) {
      absl::StatusOr<std::unique_ptr<Subject>> s = Load(name, o, *configs, &pool);
      if (!s.ok()) return s.status();
      subjects.push_back(*std::move(s));
    }
    for (size_t ci = 0; ci < configs->size(); ++ci) {
      if (absl::Status s = MeasureConfig(subjects, *configs, ci, &rows); !s.ok()) return s;
    }
  } else {  // one model in memory at a time
    for (const auto& [name, o] : specs) {
      std::vector<std::unique_ptr<Subject>> one;
      absl::StatusOr<std::unique_ptr<Subject>> s = Load(name, o, *configs, &pool);
      if (!s.ok()) return s.status();
      one.push_back(*std::move(s));
      for (size_t ci = 0; ci < configs->size(); ++ci) {
        if (absl::Status st = MeasureConfig(one, *configs, ci, &rows); !st.ok()) return st;
      }
    }
  }

  auto find = [&](const std::string& name, int b, int p) -> const Row* {
    for (const Row& r : rows) {
      if (r.name == name && r.batch == b && r.prompt_len == p) return &r;
    }
    return nullptr;
  };
  absl::PrintF("Loom CPU, %d threads, token budget %d, %d decode steps, median of %d runs\n",
               threads, absl::GetFlag(FLAGS_token_budget), absl::GetFlag(FLAGS_decode_steps),
               absl::GetFlag(FLAGS_runs));
  absl::PrintF("%-18s %3s %4s %12s %12s %10s %10s\n", "model", "B", "P", "prefill t/s",
               "decode t/s", "dec/f32", "dec/q4_1");
  std::vector<std::string> json;
  for (const Row& r : rows) {
    const Row* f = find("f32", r.batch, r.prompt_len);
    const Row* q = find("q4_1", r.batch, r.prompt_len);
    absl::PrintF("%-18s %3d %4d %12.1f %12.1f %10s %10s\n", r.name, r.batch, r.prompt_len,
                 r.prefill_tok_s, r.decode_tok_s,
                 f ? absl::StrFormat("%.2fx", r.decode_tok_s / f->decode_tok_s) : "-",
                 q ? absl::StrFormat("%.2fx", r.decode_tok_s / q->decode_tok_s) : "-");
    json.push_back(absl::StrFormat(
        "{\"model\":\"%s\",\"batch\":%d,\"prompt_len\":%d,\"prefill_tok_s\":%.3f,"
        "\"decode_tok_s\":%.3f,\"best_prefill_tok_s\":%.3f,\"best_decode_tok_s\":%.3f}",
        r.name, r.batch, r.prompt_len, r.prefill_tok_s, r.decode_tok_s, r.best_prefill,
        r.best_decode));
  }
  if (interleave) {  // the same round's runs of a model and of f32 ran back to back
    for (const Row& r : rows) {
      const Row* f = find("f32", r.batch, r.prompt_len);
      if (f == nullptr || f == &r || f->decode_s.size() != r.decode_s.size()) continue;
      std::vector<double> ratios;
      for (size_t i = 0; i < r.decode_s.size(); ++i) ratios.push_back(f->decode_s[i] / r.decode_s[i]);
      std::vector<std::string> txt;
      for (double v : ratios) txt.push_back(absl::StrFormat("%.2f", v));
      absl::PrintF("%s %dx%d decode vs f32 per round: %s (median %.2fx, min %.2fx)\n", r.name,
                   r.batch, r.prompt_len, absl::StrJoin(txt, " "), bench::Median(ratios),
                   *std::min_element(ratios.begin(), ratios.end()));
    }
  }
  const std::string line = absl::StrFormat(
      "{\"impl\":\"loom\",\"threads\":%d,\"token_budget\":%d,\"decode_steps\":%d,\"runs\":%d,"
      "\"kv_cache_dtype\":\"%s\",\"results\":[%s]}",
      threads, absl::GetFlag(FLAGS_token_budget), absl::GetFlag(FLAGS_decode_steps),
      absl::GetFlag(FLAGS_runs), absl::GetFlag(FLAGS_kv_cache_dtype), absl::StrJoin(json, ","));
  absl::PrintF("%s\n", line);
  if (const std::string out = absl::GetFlag(FLAGS_json_out); !out.empty()) {
    FILE* f = std::fopen(out.c_str(), "w");
    if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot write ", out));
    std::fprintf(f, "%s\n", line.c_str());
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
    std::fprintf(stderr, "quant_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
