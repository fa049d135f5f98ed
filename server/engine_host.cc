#include "server/engine_host.h"

#include "absl/time/clock.h"
#include "server/daemon_support.h"
#include "spdlog/spdlog.h"

namespace loom {

absl::StatusOr<std::unique_ptr<EngineHost>> EngineHost::Start(const ServerOptions& o,
                                                              ServerMetrics* metrics) {
  std::unique_ptr<EngineHost> h(new EngineHost());
  const absl::Time t0 = absl::Now();
  spdlog::info("event=model_loading path={} threads={}", o.model, o.threads);
  absl::StatusOr<std::unique_ptr<ServingModel>> model =
      ServingModel::Load(o.model, o.threads, o.quantized, o.quant_scheme, o.int8_head);
  if (!model.ok()) return model.status();
  h->model_ = *std::move(model);
  spdlog::info("event=model_loaded name={} seconds={:.2f} context={}", h->model_->name,
               absl::ToDoubleSeconds(absl::Now() - t0),
               h->model_->model->config().max_context);
  absl::StatusOr<AdapterRoots> roots = AdapterRoots::Create(o.adapter_roots);
  if (!roots.ok()) return roots.status();
  AdapterStore::Options store_options;
  store_options.budget_bytes = o.adapter_bytes;
  // Every file an adapter load opens must lie under the roots and be within the size
  // limit (checked on the opened descriptor: symlinks out are refused).
  AdapterLimits limits;
  limits.max_rank = store_options.max_rank;
  limits.files.roots = roots->roots();
  limits.files.max_bytes = o.max_adapter_file_bytes;
  const ServingModel* serving = h->model_.get();
  h->store_ = std::make_unique<AdapterStore>(
      h->model_->model->config(), store_options,
      [serving, limits](const std::string& source) {
        return serving->LoadAdapterFor(source, limits);
      });
  AdapterManager::Options manager_options;
  manager_options.on_demand = o.on_demand_adapters;
  manager_options.max_on_demand_loads = o.max_on_demand_loads;
  h->adapters_ = std::make_unique<AdapterManager>(h->store_.get(), *std::move(roots),
                                                  manager_options, metrics);
  for (const PreloadAdapter& p : o.preload) {
    absl::StatusOr<AdapterInfo> info = h->adapters_->Load(p.id, p.source, /*pin=*/false);
    if (!info.ok()) {
      spdlog::error("event=preload_failed id={} error=\"{}\"", p.id,
                    std::string(info.status().message()));
    }
  }
  h->publisher_ = std::make_unique<EngineStatePublisher>(metrics->observer());
  EngineOptions engine_options = ToEngineOptions(o);
  // The one adapter gate: an id not loaded yet is loaded on demand from the roots (or
  // refused NotFound) before the engine admits the request.
  AdapterManager* adapters = h->adapters_.get();
  engine_options.ensure_adapter = [adapters](const std::string& id,
                                             std::function<void(absl::Status)> done) {
    adapters->EnsureKnownAsync(id, std::move(done));
  };
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(
      h->model_->model.get(), h->model_->tokenizer->end_of_generation_ids(), h->store_.get(),
      h->publisher_.get(), engine_options);
  if (!engine.ok()) return engine.status();
  h->engine_ = *std::move(engine);
  h->publisher_->Start(h->engine_.get());
  return h;
}

EngineHost::~EngineHost() {
  if (publisher_) publisher_->Stop();  // it polls the engine
  // The loader thread finishes its queued loads, whose callbacks post to the engine;
  // the store outlives both.
  adapters_.reset();
  engine_.reset();
}

}  // namespace loom
