#include "models/eval/eval_model.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/quant/cpu_atom_kernels.h"
#include "kernels/cpu/sgmv/cpu_lora_ops.h"
#include "kernels/quant/reference_atom_kernels.h"
#include "models/default_model.h"
#include "models/eval/f32_model_source.h"
#include "models/llama/quantized_loader.h"
#include "models/lora/adapter_loader.h"
#include "models/lora/adapter_permutation.h"
#include "models/lora/adapter_rotation.h"
#include "models/rotation/rotate_weights.h"
#include "models/weights/model_source.h"

namespace loom {

absl::StatusOr<std::unique_ptr<EvalModel>> LoadEvalModel(const EvalModelOptions& o,
                                                         kernels::ThreadPool* pool) {
  if (!o.scheme_override.empty() && o.quantized_dir.empty()) {
    return absl::InvalidArgumentError("a scheme override needs a quantized checkpoint");
  }
  if (o.rotation && (!o.f32 || !o.quantized_dir.empty())) {
    return absl::InvalidArgumentError(
        "a rotation is folded into F32 weights only (--f32 without --quantized); rotated "
        "checkpoints carry their own");
  }
  const std::string path = o.model_path.empty() ? DefaultModelPath() : o.model_path;
  absl::StatusOr<std::unique_ptr<ModelSource>> source = ModelSource::Open(path);
  if (!source.ok()) return source.status();
  auto m = std::make_unique<EvalModel>();
  m->backend = kernels::CreateCpuBackendOnPool(pool);
  m->lora = kernels::CreateCpuLoraOps(pool);
  std::optional<QuantizedWeights> quantized;
  if (!o.quantized_dir.empty()) {
    // Bound against the file as stored (its size and hash are what the checkpoint records).
    absl::StatusOr<QuantizedWeights> w =
        LoadQuantizedWeights(o.quantized_dir, **source, o.verify_sha256);
    if (!w.ok()) return w.status();
    if (!o.scheme_override.empty()) {
      absl::StatusOr<kernels::quant::QuantScheme> s =
          kernels::quant::ParseQuantScheme(o.scheme_override);
      if (!s.ok()) return s.status();
      if (absl::Status st = OverrideScheme(*s, &*w); !st.ok()) return st;
    }
    quantized = *std::move(w);
  }
  if (o.f32) {
    absl::StatusOr<std::unique_ptr<ModelSource>> f32 = DequantizeToF32(**source);
    if (!f32.ok()) return f32.status();
    source = std::move(f32);
  }
  m->description = (*source)->path();
  absl::StatusOr<std::unique_ptr<LlamaModel>> model;
  if (quantized) {
    m->atom = o.reference_atom ? kernels::quant::CreateReferenceAtomKernels()
                               : kernels::quant::CreateCpuAtomKernels(pool);
    absl::StrAppend(&m->description, " + ",
                    std::string(kernels::quant::QuantSchemeName(quantized->scheme)), " ",
                    o.quantized_dir, " (", std::string(m->atom->name()), ")");
    model = LlamaModel::CreateQuantized(*std::move(source), *std::move(quantized),
                                        m->backend.get(), m->atom.get(), m->lora.get());
  } else if (o.rotation) {
    absl::StatusOr<std::shared_ptr<const ModelRotation>> rot =
        RotateF32Model(*o.rotation, source->get());
    if (!rot.ok()) return rot.status();
    absl::StrAppend(&m->description, " rotated (seed ", o.rotation->seed, ", fingerprint ",
                    (*rot)->Fingerprint(), ")");
    model = LlamaModel::CreateRotated(*std::move(source), *std::move(rot), m->backend.get(),
                                      m->lora.get());
  } else {
    model = LlamaModel::Create(*std::move(source), m->backend.get(), m->lora.get());
  }
  if (!model.ok()) return model.status();
  if (o.int8_head) {
    if (absl::Status s = (*model)->UseInt8Head(); !s.ok()) return s;
    absl::StrAppend(&m->description, " + int8 head");
  }
  m->model = *std::move(model);
  return m;
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> BindAdapter(std::unique_ptr<LoraAdapter> adapter,
                                                         const LlamaModel& model) {
  if (model.quantized() == nullptr && model.rotation() != nullptr) {
    if (adapter == nullptr) return absl::InvalidArgumentError("BindAdapter: null adapter");
    return RotateLoraAdapter(*adapter, *model.rotation());
  }
  return BindAdapterToQuantized(std::move(adapter), model.quantized());
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadAdapterFor(const std::string& path,
                                                            const LlamaModel& model) {
  absl::StatusOr<std::unique_ptr<LoraAdapter>> a =
      LoadAdapter(path, model.config(), AdapterLimits());
  if (!a.ok()) return a.status();
  return BindAdapter(*std::move(a), model);
}

}  // namespace loom
