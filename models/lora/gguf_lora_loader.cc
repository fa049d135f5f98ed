#include "models/lora/gguf_lora_loader.h"

#include <cmath>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/lora/lora_tensor_copy.h"
#include "models/weights/gguf_file.h"
#include "models/weights/qk_permutation.h"
#include "models/weights/untrusted_text.h"
#include "re2/re2.h"

namespace loom {
namespace {

std::string ShapeStr(const std::vector<int64_t>& s) {
  return "[" + absl::StrJoin(s, ", ") + "]";
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadGgufLora(const std::string& path,
                                                         const LlamaConfig& base,
                                                         const AdapterLimits& limits) {
  if (absl::Status st = base.Validate(); !st.ok()) {
    return absl::InvalidArgumentError("invalid base config: " + std::string(st.message()));
  }
  auto opened = GgufFile::Open(path, limits.files);
  if (!opened.ok()) {
    const absl::Status& st = opened.status();
    if (absl::IsNotFound(st) || absl::IsResourceExhausted(st) || absl::IsPermissionDenied(st)) {
      return st;
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("not a readable GGUF-LoRA file: %s", st.message()));
  }
  const GgufFile& f = **opened;
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: %s", path, why));
  };
  auto type = f.GetString("general.type");
  if (!type.ok() || *type != "adapter") {
    return refuse("general.type is not \"adapter\" (is this a base model, not a LoRA?)");
  }
  auto atype = f.GetString("adapter.type");
  if (!atype.ok() || *atype != "lora") return refuse("adapter.type is not \"lora\"");
  if (f.Has("general.architecture")) {
    auto arch = f.GetString("general.architecture");
    if (!arch.ok() || *arch != "llama") {
      return refuse("general.architecture is not \"llama\"");
    }
  }
  if (f.Has("adapter.alora.invocation_tokens")) {
    return refuse("activated LoRA (adapter.alora.invocation_tokens) is not supported");
  }
  double alpha = 0.0;
  if (f.Has("adapter.lora.alpha")) {
    auto a = f.GetFloat("adapter.lora.alpha");
    if (!a.ok()) return refuse("adapter.lora.alpha is not a number");
    alpha = *a;
  }

  struct Pair {
    const GgufTensorInfo* a = nullptr;
    const GgufTensorInfo* b = nullptr;
  };
  std::map<std::pair<int, LoraTarget>, Pair> found;
  static const re2::RE2 kRe(R"(blk\.(\d+)\.([a-z_]+)\.weight\.lora_(a|b))");
  for (const GgufTensorInfo& t : f.tensor_infos()) {
    auto bad_t = [&](const std::string& why) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: tensor %s: %s", path, QuoteUntrusted(t.name), why));
    };
    if (t.name.size() > kMaxAdapterTensorNameBytes) {
      return bad_t(absl::StrFormat("name longer than %d bytes", kMaxAdapterTensorNameBytes));
    }
    if (t.name.rfind("token_embd", 0) == 0 || t.name.rfind("output.", 0) == 0) {
      return bad_t("embedding or lm_head (output) LoRA is not supported");
    }
    std::string layer_text, stem, a_or_b;
    if (!re2::RE2::FullMatch(t.name, kRe, &layer_text, &stem, &a_or_b)) {
      return bad_t("not a LoRA a/b weight of a Llama projection (unsupported tensor)");
    }
    int64_t layer = 0;
    if (!absl::SimpleAtoi(layer_text, &layer) || layer > 1000000) return bad_t("bad layer");
    auto target = LoraTargetFromGgufStem(stem);
    if (!target.has_value()) {
      return bad_t("unknown target module " + QuoteUntrusted(stem) +
                   " (Loom supports attn_q attn_k attn_v attn_output ffn_gate ffn_up "
                   "ffn_down)");
    }
    if (layer >= base.n_layers) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor %s: layer %d, but the base model has %d layers", path,
                          QuoteUntrusted(t.name), layer, base.n_layers));
    }
    Pair& p = found[{static_cast<int>(layer), *target}];
    const GgufTensorInfo*& slot = a_or_b == "a" ? p.a : p.b;
    if (slot != nullptr) return bad_t("given twice");
    slot = &t;
  }
  if (found.empty()) return refuse("no LoRA tensors");

  std::vector<LoraProjectionInfo> infos;
  for (const auto& [key, p] : found) {
    const auto [layer, target] = key;
    const std::string stem = absl::StrFormat("blk.%d.%s.weight", layer, GgufTensorStem(target));
    if (p.a == nullptr || p.b == nullptr) {
      return refuse(absl::StrFormat("missing tensor '%s.lora_%s'", stem,
                                    p.a == nullptr ? "a" : "b"));
    }
    const ProjectionShape ps = BaseProjectionShape(base, target);
    if (p.a->shape.size() != 2 || p.b->shape.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s': LoRA tensors must be 2-D", path, stem));
    }
    const int64_t rank = p.a->shape[0];
    if (rank < 1) return refuse(absl::StrFormat("tensor '%s.lora_a': rank 0", stem));
    if (rank > limits.max_rank) {
      return refuse(absl::StrFormat("tensor '%s.lora_a': rank %d is above the configured "
                                    "limit %d",
                                    stem, rank, limits.max_rank));
    }
    const std::vector<int64_t> want_a = {rank, ps.h_in}, want_b = {ps.h_out, rank};
    if (p.a->shape != want_a || p.b->shape != want_b) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensors '%s.lora_a/lora_b': expected row-major shapes %s and %s (base %s "
          "%d -> %d, rank %d), got %s and %s",
          path, stem, ShapeStr(want_a), ShapeStr(want_b), GgufTensorStem(target), ps.h_in,
          ps.h_out, rank, ShapeStr(p.a->shape), ShapeStr(p.b->shape)));
    }
    const double scale = alpha == 0.0 ? 1.0 : alpha / static_cast<double>(rank);
    if (absl::Status st = CheckLoraScale(scale, path, "adapter.lora.alpha", alpha, stem);
        !st.ok()) {
      return st;
    }
    infos.push_back(
        {layer, target, static_cast<int>(rank), static_cast<float>(scale), ps.h_in, ps.h_out});
  }
  auto ad = LoraAdapter::Create(path, path, AdapterFormat::kGgufLora, base.n_layers, infos);
  if (!ad.ok()) return ad.status();
  const bool unpermute = base.rope_layout == RopeLayout::kHalves;
  const auto& projs = (*ad)->projections();
  for (size_t i = 0; i < projs.size(); ++i) {
    const LoraProjectionInfo& p = projs[i];
    const Pair& pr = found.at({p.layer, p.target});
    StoredMatrix a{path + ": tensor '" + pr.a->name + "'", pr.a->dtype, f.TensorData(*pr.a)};
    StoredMatrix b{path + ": tensor '" + pr.b->name + "'", pr.b->dtype, f.TensorData(*pr.b)};
    if (absl::Status st = CopyToBf16(a, p.rank, p.h_in, nullptr, (*ad)->mutable_a(i));
        !st.ok()) {
      return st;
    }
    std::function<int64_t(int64_t)> rows;
    if (unpermute && (p.target == LoraTarget::kQ || p.target == LoraTarget::kK)) {
      const int64_t hd = base.head_dim;
      rows = [hd](int64_t h) { return GgufRowOfHfRow(h, hd); };
    }
    if (absl::Status st = CopyToBf16(b, p.h_out, p.rank, rows, (*ad)->mutable_b(i));
        !st.ok()) {
      return st;
    }
  }
  return ad;
}

}  // namespace loom
