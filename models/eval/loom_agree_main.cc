// loom_agree: greedy agreement of a model (by default the stored GGUF; with --quantized a
// quantized checkpoint) with the FP32 path (the same base dequantized to F32), with and
// without a LoRA adapter (models/eval/greedy_agreement.h for the measures).
//
//   loom_agree --text FILE [--quantized DIR [--scheme_override S]] [--adapter PATH]
//              [--model PATH] [--prompts 16] [--prompt_len 64] [--gen 32] [--threads 2]
//
// Prompts: --prompts windows of --prompt_len tokens at evenly spaced offsets of the text's
// first --max_tokens tokens. Prints one block of figures; exit status 1 on any error.
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/thread_pool.h"
#include "models/eval/eval_model.h"
#include "models/eval/greedy_agreement.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/engine/lora_adapter_weights.h"

ABSL_FLAG(std::string, model, "", "base GGUF file or HF directory (default: the default model)");
ABSL_FLAG(std::string, text, "", "UTF-8 text file the prompts are cut from (required)");
ABSL_FLAG(std::string, quantized, "", "loom-atom checkpoint: the model under test");
ABSL_FLAG(std::string, scheme_override, "", "run the checkpoint with another activation precision");
ABSL_FLAG(std::string, adapter, "", "LoRA adapter (PEFT directory or GGUF-LoRA file)");
ABSL_FLAG(int, prompts, 16, "prompts cut from the text");
ABSL_FLAG(int, prompt_len, 64, "tokens per prompt");
ABSL_FLAG(int, gen, 32, "greedy tokens generated per prompt");
ABSL_FLAG(int64_t, max_tokens, 50000, "use only the text's first N tokens");
ABSL_FLAG(int, threads, 2, "CPU threads (0 = all)");
ABSL_FLAG(bool, reference_atom, false, "scalar reference Atom kernels (slow)");

namespace loom {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Runs {
  GreedyRun base;
  std::optional<GreedyRun> adapter;
};

absl::StatusOr<Runs> RunBoth(const LlamaModel& m, const std::vector<std::vector<int32_t>>& p,
                             int gen, const std::string& adapter_path) {
  Runs r;
  absl::StatusOr<GreedyRun> base = RunGreedy(m, p, gen, nullptr);
  if (!base.ok()) return base.status();
  r.base = *std::move(base);
  if (!adapter_path.empty()) {
    absl::StatusOr<std::unique_ptr<LoraAdapter>> a = LoadAdapterFor(adapter_path, m);
    if (!a.ok()) return a.status();
    LoraAdapterWeights view(a->get());
    absl::StatusOr<GreedyRun> with = RunGreedy(m, p, gen, &view);
    if (!with.ok()) return with.status();
    r.adapter = *std::move(with);
  }
  return r;
}

void Print(const char* what, const AgreementStats& s) {
  std::printf("%-22s top-1 %.4f over %lld positions; greedy %d: prefix %.2f tokens, match %.4f\n",
              what, s.top1, static_cast<long long>(s.positions), absl::GetFlag(FLAGS_gen),
              s.gen_prefix, s.gen_match);
}

absl::Status Run() {
  const std::string text_path = absl::GetFlag(FLAGS_text);
  if (text_path.empty()) return absl::InvalidArgumentError("--text is required");
  const int n_prompts = absl::GetFlag(FLAGS_prompts), len = absl::GetFlag(FLAGS_prompt_len),
            gen = absl::GetFlag(FLAGS_gen), threads = absl::GetFlag(FLAGS_threads);
  if (n_prompts < 1 || len < 1 || gen < 0 || threads < 0) {
    return absl::InvalidArgumentError("--prompts, --prompt_len >= 1; --gen, --threads >= 0");
  }
  absl::StatusOr<std::string> text = ReadFile(text_path);
  if (!text.ok()) return text.status();
  kernels::ThreadPool pool(threads);

  EvalModelOptions ro;  // the reference: FP32 path
  ro.model_path = absl::GetFlag(FLAGS_model);
  ro.f32 = true;
  EvalModelOptions to;  // under test
  to.model_path = ro.model_path;
  to.quantized_dir = absl::GetFlag(FLAGS_quantized);
  to.scheme_override = absl::GetFlag(FLAGS_scheme_override);
  to.reference_atom = absl::GetFlag(FLAGS_reference_atom);
  absl::StatusOr<std::unique_ptr<EvalModel>> test = LoadEvalModel(to, &pool);
  if (!test.ok()) return test.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::Create((*test)->model->source().vocabulary());
  if (!tok.ok()) return tok.status();
  absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(*text, false);
  if (!ids.ok()) return ids.status();
  const int64_t n = std::min<int64_t>(ids->size(), absl::GetFlag(FLAGS_max_tokens));
  if (n < len) return absl::InvalidArgumentError("the text is shorter than --prompt_len");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n_prompts; ++i) {
    const int64_t start = n_prompts == 1 ? 0 : (n - len) * i / (n_prompts - 1);
    prompts.emplace_back(ids->begin() + start, ids->begin() + start + len);
  }
  const std::string adapter = absl::GetFlag(FLAGS_adapter);
  absl::StatusOr<Runs> t = RunBoth(*(*test)->model, prompts, gen, adapter);
  if (!t.ok()) return t.status();
  const std::string test_desc = (*test)->description;
  test->reset();  // one model in memory at a time
  absl::StatusOr<std::unique_ptr<EvalModel>> ref = LoadEvalModel(ro, &pool);
  if (!ref.ok()) return ref.status();
  absl::StatusOr<Runs> r = RunBoth(*(*ref)->model, prompts, gen, adapter);
  if (!r.ok()) return r.status();

  std::printf("test:      %s\n", test_desc.c_str());
  std::printf("reference: %s\n", (*ref)->description.c_str());
  if (!adapter.empty()) std::printf("adapter:   %s\n", adapter.c_str());
  std::printf("prompts:   %d x %d tokens from %s (%lld tokens used)\n", n_prompts, len,
              text_path.c_str(), static_cast<long long>(n));
  Print("base vs FP32:", Compare(t->base, r->base));
  if (t->adapter) {
    Print("adapter vs FP32+adapter:", Compare(*t->adapter, *r->adapter));
    const AdapterDirection d = CompareAdapter(r->base, *r->adapter, t->base, *t->adapter);
    std::printf("adapter direction:     %lld positions where the adapter changes FP32's "
                "argmax; test+adapter follows %.4f (test without adapter: %.4f)\n",
                static_cast<long long>(d.moved), d.followed, d.followed_base);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = loom::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "loom_agree: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
