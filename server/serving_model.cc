#include "server/serving_model.h"

#include <filesystem>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/quant/cpu_atom_kernels.h"
#include "models/llama/quantized_loader.h"
#include "models/lora/adapter_loader.h"
#include "models/lora/adapter_permutation.h"
#include "spdlog/spdlog.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "models/weights/model_source.h"

namespace loom {

std::string ModelId(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();
  std::string name = p.filename().string();
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) {
    name.resize(name.size() - 5);
  }
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot + 1 < name.size()) {
    const std::string suffix = name.substr(dot + 1);
    const bool quant = suffix[0] == 'Q' || suffix[0] == 'F' || suffix.rfind("BF", 0) == 0 ||
                       suffix.rfind("IQ", 0) == 0;
    if (quant) name.resize(dot);
  }
  return name.empty() ? std::string("model") : name;
}

absl::StatusOr<std::unique_ptr<ServingModel>> ServingModel::Load(
    const std::string& path, int threads, const std::string& quantized,
    const std::string& quant_scheme, bool int8_head) {
  auto m = std::make_unique<ServingModel>();
  absl::StatusOr<std::unique_ptr<ModelSource>> source = ModelSource::Open(path);
  if (!source.ok()) return source.status();
  m->vocab = (*source)->vocabulary();
  m->name = ModelId(path);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(m->vocab);
  if (!tok.ok()) return tok.status();
  m->tokenizer = *std::move(tok);
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::ChatML(*m->tokenizer, m->vocab);
  if (chat.ok()) m->chat.emplace(*std::move(chat));
  m->pool = std::make_unique<kernels::ThreadPool>(threads);
  m->backend = kernels::CreateCpuBackendOnPool(m->pool.get());
  m->lora_ops = kernels::CreateCpuLoraOps(m->pool.get());
  if (quantized.empty()) {
    if (int8_head) {
      return absl::InvalidArgumentError("int8_head requires a quantized checkpoint");
    }
    absl::StatusOr<std::unique_ptr<LlamaModel>> model =
        LlamaModel::Create(*std::move(source), m->backend.get(), m->lora_ops.get());
    if (!model.ok()) return model.status();
    m->model = *std::move(model);
    return m;
  }
  absl::StatusOr<QuantizedWeights> q = LoadQuantizedWeights(quantized, **source);
  if (!q.ok()) return q.status();
  if (!quant_scheme.empty()) {
    absl::StatusOr<kernels::quant::QuantScheme> scheme =
        kernels::quant::ParseQuantScheme(quant_scheme);
    if (!scheme.ok()) return scheme.status();
    if (absl::Status s = OverrideScheme(*scheme, &*q); !s.ok()) return s;
  }
  m->atom = kernels::quant::CreateCpuAtomKernels(m->pool.get());
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::CreateQuantized(
      *std::move(source), *std::move(q), m->backend.get(), m->atom.get(), m->lora_ops.get());
  if (!model.ok()) return model.status();
  if (int8_head) {
    if (absl::Status s = (*model)->UseInt8Head(); !s.ok()) return s;
  }
  m->model = *std::move(model);
  spdlog::info("event=quantized_model checkpoint={} scheme={} kernels={} head={}", quantized,
               kernels::quant::QuantSchemeName(m->model->scheme()), m->atom->name(),
               int8_head ? "int8" : "stored");
  return m;
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> ServingModel::LoadAdapterFor(
    const std::string& source, const AdapterLimits& limits) const {
  absl::StatusOr<std::unique_ptr<LoraAdapter>> adapter =
      LoadAdapter(source, model->config(), limits);
  if (!adapter.ok()) return adapter.status();
  return BindAdapterToQuantized(*std::move(adapter), model->quantized());
}

}  // namespace loom
