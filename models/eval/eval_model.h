// One way for the evaluation tools (loom_ppl, loom_agree, benchmarks) to build a model from
// flags: the base model as stored (GGUF Q4_1 by default), all weights dequantized to F32,
// or a loom-atom quantized checkpoint overlaid on the base (optionally with another
// activation precision), on the CPU backend; and to bind a LoRA adapter to it (a permuted
// copy for a quantized model, models/lora/adapter_permutation.h).
#ifndef LOOM_MODELS_EVAL_EVAL_MODEL_H_
#define LOOM_MODELS_EVAL_EVAL_MODEL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/lora_ops.h"
#include "kernels/quant/atom_format.h"
#include "models/llama/llama_model.h"
#include "models/lora/lora_adapter.h"
#include "models/rotation/model_rotation.h"

namespace loom {

struct EvalModelOptions {
  std::string model_path;       // GGUF file or HF directory; empty = the default model
  bool f32 = false;             // dequantize the base's weights to F32 in memory
  std::string quantized_dir;    // loom-atom checkpoint directory; empty = unquantized
  std::string scheme_override;  // "", or a scheme with the checkpoint's weight bits
  bool verify_sha256 = false;   // check the base file's sha256 against the checkpoint's
  bool reference_atom = false;  // scalar reference Atom kernels instead of the CPU ones
  bool int8_head = false;       // quantized only: the INT8 output head (quantized_head.h)
  // f32 without quantized_dir only: fold this rotation into the F32 weights
  // (models/rotation/rotate_weights.h) and run the rotated model.
  std::optional<RotationSpec> rotation;
};

// A model with the kernels it runs on. `pool` (shared by all kernels) must outlive it.
struct EvalModel {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<kernels::LoraOps> lora;
  std::unique_ptr<kernels::quant::AtomKernels> atom;  // quantized mode only
  std::unique_ptr<LlamaModel> model;
  std::string description;  // e.g. "path (dequantized to F32)" or "... + w4a4 dir"
};

// InvalidArgument for a bad scheme_override (or one without quantized_dir), a rotation
// without f32 or with quantized_dir; errors of
// ModelSource::Open, DequantizeToF32, LoadQuantizedWeights (FailedPrecondition: the
// checkpoint is for another model) and LlamaModel::Create*.
absl::StatusOr<std::unique_ptr<EvalModel>> LoadEvalModel(const EvalModelOptions& options,
                                                         kernels::ThreadPool* pool);

// `adapter` made ready for `model`: itself for an unquantized model, its rotated copy for a
// rotated F32 one, its permuted (and, for a rotated checkpoint, rotated) copy for a
// quantized one.
absl::StatusOr<std::unique_ptr<LoraAdapter>> BindAdapter(std::unique_ptr<LoraAdapter> adapter,
                                                         const LlamaModel& model);

// LoadAdapter (PEFT directory or GGUF-LoRA file) against the model's config, then
// BindAdapter.
absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadAdapterFor(const std::string& path,
                                                            const LlamaModel& model);

}  // namespace loom

#endif  // LOOM_MODELS_EVAL_EVAL_MODEL_H_
