#include "scheduler/engine/engine_test_support.h"

#include "absl/synchronization/notification.h"
#include "models/lora/peft_writer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "models/testing/test_model.h"
#include "models/weights/model_source.h"

namespace loom::testing {

absl::StatusOr<std::unique_ptr<WorkerWorld>> WorkerWorld::Create(
    const std::string& adapter_dir, int threads, EngineOptions engine_options) {
  auto w = std::make_unique<WorkerWorld>();
  w->pool = std::make_unique<kernels::ThreadPool>(threads);
  w->backend = kernels::CreateCpuBackendOnPool(w->pool.get());
  w->lora_ops = kernels::CreateCpuLoraOps(w->pool.get());
  absl::StatusOr<std::unique_ptr<ModelSource>> source = ModelSource::Open(DefaultModelPath());
  if (!source.ok()) return source.status();
  const Vocabulary vocab = (*source)->vocabulary();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(vocab);
  if (!tok.ok()) return tok.status();
  w->tokenizer = *std::move(tok);
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::ChatML(*w->tokenizer, vocab);
  if (chat.ok()) w->chat.emplace(*std::move(chat));
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Create(*std::move(source), w->backend.get(), w->lora_ops.get());
  if (!model.ok()) return model.status();
  w->model = *std::move(model);
  const LlamaConfig& config = w->model->config();
  w->adapter_dir = adapter_dir;
  for (int i = 0; i < 2; ++i) {
    SyntheticAdapterSpec spec;
    spec.rank = i == 0 ? 8 : 16;
    spec.alpha = 2.0f * spec.rank;
    spec.seed = 100 + i;
    spec.dtype = DType::kBF16;
    absl::StatusOr<SyntheticAdapter> a = MakeSyntheticAdapter(config, spec);
    if (!a.ok()) return a.status();
    absl::Status s = WritePeftAdapter(*a, adapter_dir + "/a" + std::to_string(i));
    if (!s.ok()) return s;
  }
  w->store = std::make_unique<AdapterStore>(config, AdapterStore::Options());
  if (engine_options.kv.n_pages == 0) engine_options.kv.n_pages = 256;
  w->engine_options = engine_options;
  absl::StatusOr<std::unique_ptr<Engine>> engine = w->NewEngine(w->engine_options);
  if (!engine.ok()) return engine.status();
  w->engine = *std::move(engine);
  return w;
}

absl::StatusOr<std::unique_ptr<Engine>> WorkerWorld::NewEngine(EngineOptions options) const {
  return Engine::Create(model.get(), tokenizer->end_of_generation_ids(), store.get(), nullptr,
                        options);
}

WorkerWorld::~WorkerWorld() {
  engine.reset();
  store.reset();
  model.reset();
}

WorkerCallback EventCollector::Callback() {
  return [this](const WorkerEvent& e) {
    absl::MutexLock l(&mu_);
    if (finished_ > 0) after_final_ = true;
    ++events_;
    tokens_.insert(tokens_.end(), e.token_ids.begin(), e.token_ids.end());
    logprobs_.insert(logprobs_.end(), e.logprobs.begin(), e.logprobs.end());
    top_.insert(top_.end(), e.top_logprobs.begin(), e.top_logprobs.end());
    if (e.finished) {
      ++finished_;
      final_ = e;
    }
  };
}

void EventCollector::Wait() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n > 0; }, &finished_));
}

std::vector<int32_t> EventCollector::tokens() const {
  absl::MutexLock l(&mu_);
  return tokens_;
}
std::vector<float> EventCollector::logprobs() const {
  absl::MutexLock l(&mu_);
  return logprobs_;
}
std::vector<std::vector<std::pair<int32_t, float>>> EventCollector::top_logprobs() const {
  absl::MutexLock l(&mu_);
  return top_;
}
WorkerEvent EventCollector::final_event() const {
  absl::MutexLock l(&mu_);
  return final_;
}
int EventCollector::events() const {
  absl::MutexLock l(&mu_);
  return events_;
}
int EventCollector::finished_events() const {
  absl::MutexLock l(&mu_);
  return finished_;
}
bool EventCollector::event_after_final() const {
  absl::MutexLock l(&mu_);
  return after_final_;
}

std::unique_ptr<EventCollector> RunToEnd(Worker* worker, const WorkerRequest& request) {
  auto c = std::make_unique<EventCollector>();
  absl::StatusOr<uint64_t> h = worker->Start(request, c->Callback());
  if (!h.ok()) {
    WorkerEvent e;
    e.finished = true;
    e.error = h.status();
    c->Callback()(e);
  }
  c->Wait();
  return c;
}

std::vector<int32_t> Encode(const WorkerWorld& world, const std::string& text) {
  absl::StatusOr<std::vector<int32_t>> ids = world.tokenizer->Encode(text, false);
  return ids.ok() ? *ids : std::vector<int32_t>();
}

}  // namespace loom::testing
