#include "server/router/router_model.h"

#include <algorithm>
#include <filesystem>

#include "models/weights/model_source.h"
#include "server/serving_model.h"

namespace loom {
absl::StatusOr<RouterModel> LoadRouterModel(const std::string& path, int max_context_cap) {
  absl::StatusOr<std::unique_ptr<ModelSource>> source = ModelSource::Open(path);
  if (!source.ok()) return source.status();
  RouterModel out;
  out.serving = std::make_unique<ServingModel>();
  ServingModel& m = *out.serving;
  m.vocab = (*source)->vocabulary();
  m.name = ModelId(path);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(m.vocab);
  if (!tok.ok()) return tok.status();
  m.tokenizer = *std::move(tok);
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::ChatML(*m.tokenizer, m.vocab);
  if (chat.ok()) m.chat.emplace(*std::move(chat));
  out.max_context = (*source)->config().max_context;
  if (max_context_cap > 0) out.max_context = std::min(out.max_context, max_context_cap);
  return out;
}

}  // namespace loom
