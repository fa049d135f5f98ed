// Writes a ModelSource as a Hugging Face Llama directory that ReadHfDirectory (and HF
// transformers) can load: config.json, generation_config.json, model.safetensors or
// n shards + model.safetensors.index.json, tokenizer.json (byte-level BPE) or
// tokenizer.model (SentencePiece bytes), tokenizer_config.json.
#ifndef LOOM_MODELS_WEIGHTS_HF_EXPORTER_H_
#define LOOM_MODELS_WEIGHTS_HF_EXPORTER_H_

#include <string>

#include "absl/status/status.h"
#include "kernels/dtype.h"
#include "models/weights/model_source.h"

namespace loom {

// Every Llama tensor of `src` is dequantized and written as `dtype` (kF32, kF16 or kBF16,
// round-to-nearest-even) under its HF name. Q/K rows are un-permuted from GGUF order to HF
// order when src's rope_layout is kAdjacentPairs (see qk_permutation.h). `n_shards` >= 1;
// with 1 the weights go to model.safetensors, else to model-0000k-of-0000n.safetensors
// split by size (fewer files if there are fewer tensors). `out_dir` is created if needed;
// existing files of the same names are overwritten.
absl::Status ExportHfDirectory(const ModelSource& src, const std::string& out_dir, DType dtype,
                               int n_shards);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_HF_EXPORTER_H_
