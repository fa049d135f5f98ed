#include "models/weights/hf_directory_reader.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/weights/hf_config.h"
#include "models/weights/hf_tensor_names.h"
#include "models/weights/hf_tokenizer.h"
#include "models/weights/json_file.h"
#include "models/weights/llama_tensors.h"
#include "models/weights/safetensors_file.h"

namespace loom {
namespace {

std::string BaseName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// The shard file names: model.safetensors, or the distinct values of the index's
// weight_map (each a plain file name inside `dir`). `expected` gets tensor -> shard.
absl::Status ListShards(const std::string& dir, std::vector<std::string>* shards,
                        std::map<std::string, std::string>* expected) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!FileExists(index_path)) {
    if (!FileExists(dir + "/model.safetensors")) {
      return absl::NotFoundError(absl::StrFormat(
          "%s: no model.safetensors or model.safetensors.index.json", dir));
    }
    shards->push_back("model.safetensors");
    return absl::OkStatus();
  }
  auto index = ReadJsonObject(index_path);
  if (!index.ok()) return index.status();
  auto map = index->find("weight_map");
  if (map == index->end() || !map->is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: missing 'weight_map'", index_path));
  }
  std::set<std::string> seen;
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it.value().is_string()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: weight_map['%s'] is not a file name", index_path, it.key()));
    }
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: shard name '%s' must be a plain file name in the directory", index_path, shard));
    }
    (*expected)[it.key()] = shard;
    if (seen.insert(shard).second) shards->push_back(shard);
  }
  return absl::OkStatus();
}

absl::Status LoadTensors(const std::string& dir, const LlamaConfig& config, ModelSource* src) {
  std::vector<std::string> shards;
  std::map<std::string, std::string> expected;
  if (auto s = ListShards(dir, &shards, &expected); !s.ok()) return s;
  std::map<std::string, std::string> where;  // hf name -> shard it was found in
  for (const std::string& shard : shards) {
    const std::string path = dir + "/" + shard;
    if (!FileExists(path)) {
      return absl::NotFoundError(absl::StrFormat("%s: shard %s is missing", dir, shard));
    }
    auto file = SafetensorsFile::Open(path);
    if (!file.ok()) return file.status();
    for (const auto& [name, t] : (*file)->tensors()) {
      if (auto [it, fresh] = where.emplace(name, shard); !fresh) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' appears in both %s and %s", dir, name, it->second, shard));
      }
      if (!expected.empty()) {
        auto e = expected.find(name);
        if (e == expected.end() || e->second != shard) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: tensor '%s' is in %s, but the index says %s", dir, name, shard,
              e == expected.end() ? "nothing" : e->second));
        }
      }
      const std::optional<std::string> canonical = HfToGgufName(name);
      if (!canonical) continue;  // e.g. rotary_emb.inv_freq: recomputed, not loaded
      if (*canonical == "output.weight" && config.tied_embeddings) continue;
      if (!t.dtype) {
        return absl::UnimplementedError(absl::StrFormat(
            "%s: tensor '%s' has dtype %s; supported: F32, F16, BF16", path, name,
            t.dtype_name));
      }
      WeightTensor w;
      w.name = *canonical;
      w.dtype = *t.dtype;
      w.shape = t.shape;
      w.data = t.data;
      w.nbytes = t.nbytes;
      if (!src->tensors_.emplace(*canonical, std::move(w)).second) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: two tensors map to '%s' (the second is '%s')", dir, *canonical, name));
      }
    }
    src->files_.push_back((*file)->ReleaseFile());
  }
  for (const auto& [name, shard] : expected) {
    if (!where.count(name)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the index lists tensor '%s' in %s, which does not contain it", dir, name, shard));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Vocabulary> LoadVocabulary(const std::string& dir, const nlohmann::json& config,
                                          int vocab_size) {
  absl::StatusOr<Vocabulary> v;
  if (FileExists(dir + "/tokenizer.model")) {
    auto bytes = ReadFileToString(dir + "/tokenizer.model", size_t{64} << 20);
    if (!bytes.ok()) return bytes.status();
    v = VocabularyFromSentencePiece(*bytes, dir + "/tokenizer.model");
  } else if (FileExists(dir + "/tokenizer.json")) {
    auto j = ReadJsonObject(dir + "/tokenizer.json");
    if (!j.ok()) return j.status();
    v = VocabularyFromTokenizerJson(*j, dir + "/tokenizer.json");
  } else {
    return absl::NotFoundError(
        absl::StrFormat("%s: no tokenizer.model or tokenizer.json", dir));
  }
  if (!v.ok()) return v.status();
  if (auto s = PadVocabulary(vocab_size, dir + "/tokenizer", &*v); !s.ok()) return s;
  const std::string tc_path = dir + "/tokenizer_config.json";
  if (FileExists(tc_path)) {
    auto tc = ReadJsonObject(tc_path);
    if (!tc.ok()) return tc.status();
    if (auto s = ApplyTokenizerConfig(*tc, tc_path, &*v); !s.ok()) return s;
  }
  const std::string gc_path = dir + "/generation_config.json";
  if (FileExists(gc_path)) {
    auto gc = ReadJsonObject(gc_path);
    if (!gc.ok()) return gc.status();
    if (auto s = ApplySpecialIds(*gc, gc_path, &*v); !s.ok()) return s;
  }
  if (auto s = ApplySpecialIds(config, dir + "/config.json", &*v); !s.ok()) return s;
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelSource>> ReadHfDirectory(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  auto json = ReadJsonObject(config_path);
  if (!json.ok()) return json.status();
  auto config = LlamaConfigFromHfJson(*json, config_path, BaseName(dir));
  if (!config.ok()) return config.status();
  if (absl::Status s = config->Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", config_path, s.message()));
  }
  auto src = std::make_unique<ModelSource>();
  src->path_ = dir;
  if (auto s = LoadTensors(dir, *config, src.get()); !s.ok()) return s;
  if (auto s = CheckLlamaTensors(dir, *config, src->tensors_); !s.ok()) return s;
  auto vocab = LoadVocabulary(dir, *json, config->vocab_size);
  if (!vocab.ok()) return vocab.status();
  src->config_ = *std::move(config);
  src->vocab_ = *std::move(vocab);
  return src;
}

}  // namespace loom
