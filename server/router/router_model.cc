#include "server/router/router_model.h"

#include <algorithm>
#include <filesystem>

#include "models/weights/model_source.h"

namespace loom {
namespace {

// Same rule as ServingModel's id: the file or directory name without ".gguf" and without
// a trailing quantisation suffix.
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

}  // namespace

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
