#include "server/cli/generate_command.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "models/lora/adapter_loader.h"
#include "scheduler/engine/lora_adapter_weights.h"
#include "models/default_model.h"
#include "models/generation/generator.h"
#include "models/llama/llama_model.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/tokenizer.h"
#include "models/weights/model_source.h"
#include "server/cli/cli_args.h"

namespace loom::cli {

const char kGenerateUsage[] =
    "usage: loom generate [--model PATH] [--chat] [--max-tokens N] [--temperature T]\n"
    "                     [--top-p P] [--top-k K] [--min-p M] [--repeat-penalty R]\n"
    "                     [--seed S] [--stop STR] [--threads N]\n"
    "                     [--system TEXT | --default-system] [--adapter PATH] PROMPT\n"
    "  --adapter: a PEFT LoRA directory or a llama.cpp GGUF-LoRA file.\n"
    "  --chat renders PROMPT as a ChatML user turn (no system line unless --system TEXT,\n"
    "  or --default-system for the model's own default line).\n";

namespace {

#define LOOM_RETURN_IF_ERROR(expr)            \
  do {                                        \
    if (absl::Status _s = (expr); !_s.ok()) { \
      return _s;                              \
    }                                         \
  } while (0)
#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_or = (expr);                \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

}  // namespace

absl::Status RunGenerate(const std::vector<std::string>& args) {
  const FlagSpec spec{{"model", "max_tokens", "temperature", "top_p", "top_k", "min_p",
                       "repeat_penalty", "seed", "stop", "threads", "system", "adapter"},
                      {"chat", "default_system", "help"}};
  LOOM_ASSIGN_OR_RETURN(flags, CliArgs::Parse(args, spec));
  if (flags.Has("help")) {
    std::fputs(kGenerateUsage, stdout);
    return absl::OkStatus();
  }
  if (flags.positionals().size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expected exactly one PROMPT argument, got %d\n%s",
                        flags.positionals().size(), kGenerateUsage));
  }
  const std::string prompt = flags.positionals()[0];
  GenerationRequest req;
  LOOM_ASSIGN_OR_RETURN(max_tokens, flags.GetInt("max_tokens", 256));
  LOOM_ASSIGN_OR_RETURN(temperature, flags.GetDouble("temperature", 0.0));
  LOOM_ASSIGN_OR_RETURN(top_p, flags.GetDouble("top_p", 1.0));
  LOOM_ASSIGN_OR_RETURN(top_k, flags.GetInt("top_k", 0));
  LOOM_ASSIGN_OR_RETURN(min_p, flags.GetDouble("min_p", 0.0));
  LOOM_ASSIGN_OR_RETURN(repeat, flags.GetDouble("repeat_penalty", 1.0));
  LOOM_ASSIGN_OR_RETURN(threads, flags.GetInt("threads", 0));
  req.max_tokens = max_tokens;
  req.sampling.temperature = static_cast<float>(temperature);
  req.sampling.top_p = static_cast<float>(top_p);
  req.sampling.top_k = top_k;
  req.sampling.min_p = static_cast<float>(min_p);
  req.sampling.repetition_penalty = static_cast<float>(repeat);
  if (flags.Has("seed")) {
    LOOM_ASSIGN_OR_RETURN(seed, flags.GetUint64("seed", 0));
    req.sampling.seed = seed;
    req.sampling.has_seed = true;
  }
  if (flags.Has("stop")) req.stop_strings.push_back(flags.GetString("stop", ""));
  LOOM_RETURN_IF_ERROR(req.sampling.Validate());
  if (threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");

  const std::string model_path = flags.GetString("model", DefaultModelPath());
  LOOM_ASSIGN_OR_RETURN(source, ModelSource::Open(model_path));
  const Vocabulary vocab = source->vocabulary();
  LOOM_ASSIGN_OR_RETURN(tokenizer, Tokenizer::Create(vocab));
  kernels::ThreadPool pool(threads);  // shared by the dense and the LoRA kernels
  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackendOnPool(&pool);
  std::unique_ptr<kernels::LoraOps> lora_ops = kernels::CreateCpuLoraOps(&pool);
  std::unique_ptr<LoraAdapter> adapter;
  std::unique_ptr<LoraAdapterWeights> adapter_view;
  if (flags.Has("adapter")) {
    LOOM_ASSIGN_OR_RETURN(loaded, LoadAdapter(flags.GetString("adapter", ""), source->config(),
                                              AdapterLimits()));
    adapter = std::move(loaded);
    adapter_view = std::make_unique<LoraAdapterWeights>(adapter.get());
    req.adapter = adapter_view.get();
  }
  LOOM_ASSIGN_OR_RETURN(model,
                        LlamaModel::Create(std::move(source), backend.get(), lora_ops.get()));

  if (flags.Has("chat")) {
    LOOM_ASSIGN_OR_RETURN(model_chat, ChatTemplate::ChatML(*tokenizer, vocab));
    // Like llama.cpp's built-in chatml template, no implicit system line unless asked
    // for: SmolLM2-135M (Q4_1) answers far worse under its default system line (checked
    // with llama.cpp on the same file; see README).
    const ChatTemplate chat =
        flags.Has("default_system") ? model_chat : model_chat.WithoutDefaultSystem();
    std::vector<ChatMessage> messages;
    if (flags.Has("system")) messages.push_back({"system", flags.GetString("system", "")});
    messages.push_back({"user", prompt});
    LOOM_ASSIGN_OR_RETURN(ids, chat.Render(messages, /*add_generation_prompt=*/true));
    req.prompt = std::move(ids);
  } else {
    LOOM_ASSIGN_OR_RETURN(ids, tokenizer->Encode(prompt, vocab.add_bos));
    req.prompt = std::move(ids);
  }

  GeneratorOptions gopts;
  gopts.kv.budget_bytes = 0;
  gopts.kv.n_pages =
      (static_cast<int32_t>(req.prompt.size()) + req.max_tokens + 15) / 16 + 1;
  LOOM_ASSIGN_OR_RETURN(gen, Generator::Create(model.get(), tokenizer.get(), gopts));
  GenerationTiming timing;
  LOOM_ASSIGN_OR_RETURN(
      results, gen->Run({req},
                        [](int, std::string_view text) {
                          std::fwrite(text.data(), 1, text.size(), stdout);
                          std::fflush(stdout);
                        },
                        &timing));
  std::fputc('\n', stdout);
  std::fflush(stdout);
  // The first generated token comes out of the prefill step; the rest are decode steps.
  const double prompt_tps =
      timing.prefill_seconds > 0 ? timing.prompt_tokens / timing.prefill_seconds : 0;
  const int64_t decoded = std::max<int64_t>(0, timing.generated_tokens - 1);
  const double decode_tps = timing.decode_seconds > 0 ? decoded / timing.decode_seconds : 0;
  std::fprintf(stderr,
               "[loom] prompt: %lld tokens, %.1f tok/s | decode: %lld tokens, %.1f tok/s | "
               "finish: %s | backend: %s\n",
               static_cast<long long>(timing.prompt_tokens), prompt_tps,
               static_cast<long long>(timing.generated_tokens), decode_tps,
               std::string(FinishReasonName(results[0].finish_reason)).c_str(),
               std::string(backend->name()).c_str());
  return absl::OkStatus();
}

}  // namespace loom::cli
