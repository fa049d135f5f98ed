#include "server/cli/generate_command.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "models/default_model.h"
#include "models/lora/adapter_store.h"
#include "scheduler/engine/engine.h"
#include "scheduler/frontend/local_frontend.h"
#include "server/cli/cli_args.h"
#include "server/request_validation.h"
#include "server/serving_model.h"

namespace loom::cli {

const char kGenerateUsage[] =
    "usage: loom generate [--model PATH] [--chat] [--max-tokens N] [--temperature T]\n"
    "                     [--top-p P] [--top-k K] [--min-p M] [--repeat-penalty R]\n"
    "                     [--seed S] [--stop STR] [--threads N]\n"
    "                     [--system TEXT | --default-system] [--adapter PATH]\n"
    "                     [--ignore-eos] PROMPT\n"
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

constexpr char kCliAdapterId[] = "cli";

// The request of the flags, with the prompt still as text (or a rendered chat).
absl::StatusOr<InferenceRequest> RequestOf(const CliArgs& flags, const ServingModel& model) {
  InferenceRequest req;
  LOOM_ASSIGN_OR_RETURN(max_tokens, flags.GetInt("max_tokens", 256));
  LOOM_ASSIGN_OR_RETURN(temperature, flags.GetDouble("temperature", 0.0));
  LOOM_ASSIGN_OR_RETURN(top_p, flags.GetDouble("top_p", 1.0));
  LOOM_ASSIGN_OR_RETURN(top_k, flags.GetInt("top_k", 0));
  LOOM_ASSIGN_OR_RETURN(min_p, flags.GetDouble("min_p", 0.0));
  LOOM_ASSIGN_OR_RETURN(repeat, flags.GetDouble("repeat_penalty", 1.0));
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
  if (flags.Has("stop")) req.stop.push_back(flags.GetString("stop", ""));
  if (flags.Has("adapter")) req.adapter_id = kCliAdapterId;
  req.ignore_eos = flags.Has("ignore_eos");
  const std::string prompt = flags.positionals()[0];
  if (!flags.Has("chat")) {
    req.prompt.kind = PromptInput::Kind::kText;
    req.prompt.text = prompt;
    return req;
  }
  if (!model.chat.has_value()) {
    return absl::InvalidArgumentError("--chat: the model has no chat template");
  }
  // Like llama.cpp's built-in chatml template, no implicit system line unless asked
  // for: SmolLM2-135M (Q4_1) answers far worse under its default system line (checked
  // with llama.cpp on the same file; see README).
  const ChatTemplate chat =
      flags.Has("default_system") ? *model.chat : model.chat->WithoutDefaultSystem();
  std::vector<ChatMessage> messages;
  if (flags.Has("system")) messages.push_back({"system", flags.GetString("system", "")});
  messages.push_back({"user", prompt});
  LOOM_ASSIGN_OR_RETURN(ids, chat.Render(messages, /*add_generation_prompt=*/true));
  req.prompt.kind = PromptInput::Kind::kTokenIds;
  req.prompt.token_ids.assign(ids.begin(), ids.end());
  return req;
}

// Streams one request to stdout; times the first token (prefill) and the rest (decode).
struct Printer {
  absl::Mutex mu;
  bool done = false;
  StreamEvent final_event;
  absl::Time start = absl::Now(), first_token = absl::InfiniteFuture();

  void OnEvent(const StreamEvent& e) {
    std::fwrite(e.text.data(), 1, e.text.size(), stdout);
    std::fflush(stdout);
    absl::MutexLock l(&mu);
    if (!e.token_ids.empty() && first_token == absl::InfiniteFuture()) first_token = absl::Now();
    if (e.finished) {
      final_event = e;
      done = true;
    }
  }
};

}  // namespace

absl::Status RunGenerate(const std::vector<std::string>& args) {
  const FlagSpec spec{{"model", "max_tokens", "temperature", "top_p", "top_k", "min_p",
                       "repeat_penalty", "seed", "stop", "threads", "system", "adapter"},
                      {"chat", "default_system", "ignore_eos", "help"}};
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
  LOOM_ASSIGN_OR_RETURN(threads, flags.GetInt("threads", 0));
  if (threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");
  LOOM_ASSIGN_OR_RETURN(model, ServingModel::Load(flags.GetString("model", DefaultModelPath()),
                                                  threads));
  LOOM_ASSIGN_OR_RETURN(request, RequestOf(flags, *model));
  // The same validation as loomd's edge; the whole context is allowed.
  RequestLimits limits;
  limits.max_context = model->model->config().max_context;
  limits.max_prompt_bytes = int64_t{1} << 32;
  LOOM_ASSIGN_OR_RETURN(validated, ValidateRequest(request, *model, limits));

  const ServingModel* serving = model.get();
  AdapterStore store(model->model->config(), AdapterStore::Options(),
                     [serving](const std::string& source) {
                       // The command line's own path: no roots to confine it to.
                       return serving->LoadAdapterFor(source, AdapterLimits());
                     });
  if (flags.Has("adapter")) {
    LOOM_RETURN_IF_ERROR(store.Register(kCliAdapterId, flags.GetString("adapter", "")));
  }
  EngineOptions eo;
  eo.kv.n_pages =
      (static_cast<int32_t>(validated.prompt.size()) + validated.max_tokens + 15) / 16 + 1;
  LOOM_ASSIGN_OR_RETURN(engine, Engine::Create(model->model.get(),
                                               model->tokenizer->end_of_generation_ids(),
                                               &store, nullptr, eo));
  LocalFrontend frontend(model->tokenizer.get(), engine.get());
  Printer printer;
  const int64_t prompt_tokens = static_cast<int64_t>(validated.prompt.size());
  LOOM_ASSIGN_OR_RETURN(id, frontend.Submit(std::move(validated), [&printer](
                                                                      const StreamEvent& e) {
    printer.OnEvent(e);
  }));
  (void)id;
  absl::MutexLock l(&printer.mu);
  printer.mu.Await(absl::Condition(&printer.done));
  const absl::Time end = absl::Now();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!printer.final_event.error.ok()) return printer.final_event.error;
  // The first generated token comes out of the prefill step; the rest are decode steps.
  const double prefill = absl::ToDoubleSeconds(printer.first_token - printer.start);
  const double decode = absl::ToDoubleSeconds(end - printer.first_token);
  const int64_t generated = printer.final_event.completion_tokens;
  const int64_t decoded = std::max<int64_t>(0, generated - 1);
  std::fprintf(stderr,
               "[loom] prompt: %lld tokens, %.1f tok/s | decode: %lld tokens, %.1f tok/s | "
               "finish: %s | backend: %s\n",
               static_cast<long long>(prompt_tokens), prefill > 0 ? prompt_tokens / prefill : 0,
               static_cast<long long>(generated), decode > 0 ? decoded / decode : 0,
               std::string(FinishReasonName(printer.final_event.finish_reason)).c_str(),
               std::string(model->backend->name()).c_str());
  return absl::OkStatus();
}

}  // namespace loom::cli
