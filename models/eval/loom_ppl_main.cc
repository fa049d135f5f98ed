// loom_ppl: perplexity of a model (optionally with a LoRA adapter, optionally dequantized
// to F32, optionally with its linears from a quantized checkpoint) over one or several
// text files (domains), by the strided-window method of models/eval/perplexity.h.
//
//   loom_ppl --text [NAME=]FILE[,[NAME=]FILE...] [--model PATH] [--adapter PATH]
//            [--context 512] [--stride 256]
//            [--max_tokens 50000] [--threads 2] [--f32] [--add_bos] [--verbose]
//            [--kv_dtype f16|int8|int4] [--rotate [--rotation_seed 0]]
//            [--quantized DIR [--scheme_override w4a8] [--verify_sha256] [--reference_atom]
//             [--int8_head]]
//
// With --quantized the base model (--model) supplies embeddings, norms and the output head
// (dequantized to F32 with --f32) and the checkpoint the seven linears of every layer; an
// adapter is bound through its permuted copy.
//
// Prints one summary block per text: ppl, nll, token counts, the token-id hash (compare
// with scripts/llamacpp_ppl.py) and throughput; with several texts, then one table of them
// (the model is loaded once; each text's first --max_tokens tokens). Exit status 1 on any
// error.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/kv_quant.h"
#include "models/eval/eval_model.h"
#include "models/eval/perplexity.h"
#include "models/llama/llama_model.h"
#include "models/tokenizer/tokenizer.h"
#include "scheduler/engine/lora_adapter_weights.h"

ABSL_FLAG(std::string, model, "", "GGUF file or HF directory (default: the default model)");
ABSL_FLAG(std::string, text, "",
          "UTF-8 text file to score, or several (domains): [NAME=]FILE,[NAME=]FILE,... (NAME "
          "defaults to the file name; required)");
ABSL_FLAG(std::string, adapter, "", "LoRA adapter: PEFT directory or GGUF-LoRA file");
ABSL_FLAG(int, context, 512, "window length in tokens");
ABSL_FLAG(int, stride, 256, "window step in tokens (each window scores its last `stride`)");
ABSL_FLAG(int64_t, max_tokens, 50000, "use only the text's first N tokens");
ABSL_FLAG(int, threads, 2, "CPU threads (0 = all)");
ABSL_FLAG(bool, f32, false, "run the model with every weight dequantized to F32 in memory");
ABSL_FLAG(std::string, kv_dtype, "f16", "KV cache rows: f16, int8 or int4 (asymmetric)");
ABSL_FLAG(bool, add_bos, false, "replace each window's first token by BOS");
ABSL_FLAG(bool, verbose, false, "print the running perplexity after each window");
ABSL_FLAG(std::string, quantized, "", "loom-atom quantized checkpoint directory (overlay)");
ABSL_FLAG(std::string, scheme_override, "",
          "run the checkpoint with another activation precision (w4a4 <-> w4a8)");
ABSL_FLAG(bool, verify_sha256, false, "check the base model's sha256 against the checkpoint");
ABSL_FLAG(bool, reference_atom, false, "scalar reference Atom kernels (slow)");
ABSL_FLAG(bool, rotate, false,
          "with --f32 (no --quantized): fold a QuaRot rotation into the F32 weights (the same "
          "function, rotated activations; a check of models/rotation)");
ABSL_FLAG(uint64_t, rotation_seed, 0, "with --rotate: the residual rotation's random signs");
ABSL_FLAG(bool, int8_head, false,
          "with --quantized: run the output head as INT8 Atom linear (requantized at load)");

namespace loom {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Domain {
  std::string name, path, text;
};

absl::StatusOr<std::vector<Domain>> ReadDomains(const std::string& spec) {
  std::vector<Domain> out;
  size_t b = 0;
  while (b <= spec.size()) {
    size_t e = spec.find(',', b);
    if (e == std::string::npos) e = spec.size();
    const std::string item = spec.substr(b, e - b);
    b = e + 1;
    if (item.empty()) continue;
    Domain d;
    const size_t eq = item.find('=');
    d.path = eq == std::string::npos ? item : item.substr(eq + 1);
    d.name = eq == std::string::npos ? d.path.substr(d.path.rfind('/') + 1) : item.substr(0, eq);
    absl::StatusOr<std::string> text = ReadFile(d.path);
    if (!text.ok()) return text.status();
    d.text = *std::move(text);
    out.push_back(std::move(d));
  }
  if (out.empty()) return absl::InvalidArgumentError("--text is required");
  return out;
}

absl::Status Run() {
  absl::StatusOr<std::vector<Domain>> domains = ReadDomains(absl::GetFlag(FLAGS_text));
  if (!domains.ok()) return domains.status();
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");

  kernels::ThreadPool pool(threads);  // shared by the dense, Atom and LoRA kernels
  EvalModelOptions mo;
  mo.model_path = absl::GetFlag(FLAGS_model);
  mo.f32 = absl::GetFlag(FLAGS_f32);
  mo.quantized_dir = absl::GetFlag(FLAGS_quantized);
  mo.scheme_override = absl::GetFlag(FLAGS_scheme_override);
  mo.verify_sha256 = absl::GetFlag(FLAGS_verify_sha256);
  mo.reference_atom = absl::GetFlag(FLAGS_reference_atom);
  mo.int8_head = absl::GetFlag(FLAGS_int8_head);
  if (absl::GetFlag(FLAGS_rotate)) mo.rotation = RotationSpec{absl::GetFlag(FLAGS_rotation_seed), true, true};
  absl::StatusOr<std::unique_ptr<EvalModel>> model = LoadEvalModel(mo, &pool);
  if (!model.ok()) return model.status();
  const LlamaModel& m = *(*model)->model;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::Create(m.source().vocabulary());
  if (!tokenizer.ok()) return tokenizer.status();
  std::unique_ptr<LoraAdapter> adapter;
  std::unique_ptr<LoraAdapterWeights> adapter_view;
  if (const std::string a = absl::GetFlag(FLAGS_adapter); !a.empty()) {
    absl::StatusOr<std::unique_ptr<LoraAdapter>> loaded = LoadAdapterFor(a, m);
    if (!loaded.ok()) return loaded.status();
    adapter = *std::move(loaded);
    adapter_view = std::make_unique<LoraAdapterWeights>(adapter.get());
  }
  const std::string described = (*model)->description;

  PerplexityOptions o;
  o.context = absl::GetFlag(FLAGS_context);
  o.stride = absl::GetFlag(FLAGS_stride);
  o.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  o.add_bos = absl::GetFlag(FLAGS_add_bos);
  absl::StatusOr<kernels::KvDtype> kv_dtype = kernels::ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) return kv_dtype.status();
  o.kv_dtype = *kv_dtype;
  o.adapter = adapter_view.get();
  if (absl::GetFlag(FLAGS_verbose)) {
    o.on_window = [](int done, int total, double ppl) {
      std::fprintf(stderr, "[%d/%d] ppl %.4f\n", done, total, ppl);
    };
  }
  std::string table;
  for (const Domain& d : *domains) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<PerplexityResult> r = ComputePerplexity(m, **tokenizer, d.text, o);
    if (!r.ok()) return r.status();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string& text_path = d.path;

    std::printf("model:            %s\n", described.c_str());
    if (adapter) std::printf("adapter:          %s\n", adapter->id().c_str());
    std::printf("text:             %s (%lld tokens)\n", text_path.c_str(),
                static_cast<long long>(r->text_tokens));
    std::printf("window:           context %d, stride %d, add_bos %s\n", o.context, o.stride,
                o.add_bos ? "true" : "false");
    std::printf("kv cache:         %s\n", std::string(kernels::KvDtypeName(o.kv_dtype)).c_str());
    std::printf("tokens used:      %lld (hash %016llx)\n", static_cast<long long>(r->tokens_used),
                static_cast<unsigned long long>(r->token_hash));
    std::printf("windows:          %zu\n", r->windows.size());
    std::printf("tokens scored:    %lld\n", static_cast<long long>(r->tokens_scored));
    std::printf("tokens evaluated: %lld\n", static_cast<long long>(r->tokens_evaluated));
    std::printf("nll:              %.6f\n", r->nll);
    std::printf("ppl:              %.4f\n", r->ppl);
    std::printf("time:             %.1f s (%.1f tokens/s evaluated, %d threads)\n\n", secs,
                r->tokens_evaluated / secs, pool.size());
    std::fflush(stdout);
    table += absl::StrFormat("| %s | %.4f | %.6f | %lld | %016llx |\n", d.name, r->ppl, r->nll,
                             static_cast<long long>(r->tokens_scored),
                             static_cast<unsigned long long>(r->token_hash));
  }
  if (domains->size() > 1) {
    std::printf("| domain | ppl | nll | tokens scored | token hash |\n| --- | ---: | ---: | ---: | --- |\n%s",
                table.c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = loom::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "loom_ppl: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
