// Reads a Hugging Face Llama checkpoint directory into a ModelSource:
//   config.json            -> LlamaConfig (rope_layout kHalves: HF q/k row order)
//   model.safetensors, or model.safetensors.index.json + shards
//                          -> tensors (F32/F16/BF16, memory-mapped), renamed to the
//                             canonical GGUF names (model.layers.N.self_attn.q_proj.weight
//                             -> blk.N.attn_q.weight, ...)
//   tokenizer.model        -> Vocabulary{model "llama", sentencepiece_model = the bytes}
//   else tokenizer.json    -> Vocabulary{model "gpt2"} (byte-level BPE)
//   tokenizer_config.json / generation_config.json -> bos/eos/add_bos/chat template.
#ifndef LOOM_MODELS_WEIGHTS_HF_DIRECTORY_READER_H_
#define LOOM_MODELS_WEIGHTS_HF_DIRECTORY_READER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/weights/model_source.h"

namespace loom {

absl::StatusOr<std::unique_ptr<ModelSource>> ReadHfDirectory(const std::string& dir);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_HF_DIRECTORY_READER_H_
