// The router's view of the base model: tokenizer, vocabulary, chat template, name and
// context length, WITHOUT the weights. The router tokenizes prompts and detokenizes
// streams; only workers run the model. Opening the model file maps it (GGUF: mmap, no
// tensor is read) and the mapping is dropped once the vocabulary is copied, so the
// router's memory is the tokenizer's.
#ifndef LOOM_SERVER_ROUTER_ROUTER_MODEL_H_
#define LOOM_SERVER_ROUTER_ROUTER_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/serving_model.h"

namespace loom {

struct RouterModel {
  // name, vocab, tokenizer, chat are set; pool/backend/lora_ops/model are null. Enough
  // for the edge (request_validation.h: templating and tokenizing prompts).
  std::unique_ptr<ServingModel> serving;
  int max_context = 0;  // the model's, or min(model's, the cap given)
};

// `path`: GGUF file or HF directory. `max_context_cap` > 0 caps the context (as loomd's
// --max_context). Errors of ModelSource::Open / Tokenizer::Create.
absl::StatusOr<RouterModel> LoadRouterModel(const std::string& path, int max_context_cap);

}  // namespace loom

#endif  // LOOM_SERVER_ROUTER_ROUTER_MODEL_H_
