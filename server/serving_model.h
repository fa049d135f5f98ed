// ServingModel: the base model loomd serves and everything built from its file: the CPU
// backend and LoRA kernels, the tokenizer and chat template, and the Llama model. Loaded
// once at start; immutable and thread-safe to read afterwards.
#ifndef LOOM_SERVER_SERVING_MODEL_H_
#define LOOM_SERVER_SERVING_MODEL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/lora_ops.h"
#include "kernels/quant/atom_format.h"
#include "models/lora/lora_adapter.h"
#include "models/llama/llama_model.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/tokenizer.h"
#include "models/tokenizer/vocabulary.h"

namespace loom {

// The id a model file is served under: "SmolLM2-135M-Instruct" for
// ".../SmolLM2-135M-Instruct.Q4_1.gguf" or an HF directory ".../SmolLM2-135M-Instruct/"
// (the name without ".gguf" and without a trailing quantisation suffix such as ".Q4_1",
// ".F16", ".BF16", ".IQ4_XS"); "model" if nothing is left.
std::string ModelId(const std::string& path);

struct ServingModel {
  // `path`: GGUF file or HF directory. `threads`: kernel threads (0 = all hardware
  // threads). `quantized`: a loom-atom checkpoint directory overlaid on `path` ("" =
  // none), run with `quant_scheme` ("" = the checkpoint's scheme) and, with `int8_head`,
  // the INT8 output head (LlamaModel::UseInt8Head). Errors of
  // ModelSource::Open / Tokenizer::Create / LoadQuantizedWeights (FailedPrecondition for a
  // checkpoint of another model) / LlamaModel::Create(Quantized).
  static absl::StatusOr<std::unique_ptr<ServingModel>> Load(
      const std::string& path, int threads, const std::string& quantized = "",
      const std::string& quant_scheme = "", bool int8_head = false);

  // An adapter loaded from `source` within `limits` (rank, files under the adapter
  // roots, file size) and bound to this model (for a quantized model, its copy permuted
  // to the checkpoint's channel orders). The AdapterStore's loader.
  absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadAdapterFor(
      const std::string& source, const AdapterLimits& limits) const;

  std::string name;  // the base model's id (config name, else the file's stem)
  // One pool shared by the dense and LoRA kernels (declared first: destroyed last).
  std::unique_ptr<kernels::ThreadPool> pool;
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<kernels::LoraOps> lora_ops;
  std::unique_ptr<kernels::quant::AtomKernels> atom;  // set for a quantized model
  Vocabulary vocab;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat;  // absent when the vocabulary has no ChatML markers
  std::unique_ptr<LlamaModel> model;
};

}  // namespace loom

#endif  // LOOM_SERVER_SERVING_MODEL_H_
