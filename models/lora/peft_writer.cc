#include "models/lora/peft_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "models/weights/gguf_writer.h"
#include "models/weights/qk_permutation.h"
#include "models/weights/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

// splitmix64: a small deterministic generator (same stream on every platform).
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return ((Next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }  // (0,1)
  // Box-Muller.
  double Normal() {
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

float RoundTo(DType t, float v) {
  if (t == DType::kF16) return Fp16ToFp32(Fp32ToFp16(v));
  if (t == DType::kBF16) return Bf16ToFp32(Fp32ToBf16(v));
  return v;
}

std::string Encode(DType t, const std::vector<float>& v) {
  std::string out;
  if (t == DType::kF32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  out.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = t == DType::kF16 ? Fp32ToFp16(v[i]) : Fp32ToBf16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

absl::Status MakeDirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      cur = dir.substr(0, i);
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::PermissionDeniedError(
            absl::StrFormat("%s: cannot create directory: %s", cur, std::strerror(errno)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string PeftModulePath(int layer, LoraTarget t) {
  return absl::StrFormat("model.layers.%d.%s.%s", layer, PeftModuleParent(t), PeftModuleName(t));
}

absl::StatusOr<SyntheticAdapter> MakeSyntheticAdapter(const LlamaConfig& base,
                                                      const SyntheticAdapterSpec& spec) {
  if (absl::Status st = base.Validate(); !st.ok()) return st;
  if (spec.rank < 1 || spec.rank > 65536) {
    return absl::InvalidArgumentError(absl::StrFormat("synthetic adapter: rank %d", spec.rank));
  }
  if (spec.dtype != DType::kF32 && spec.dtype != DType::kF16 && spec.dtype != DType::kBF16) {
    return absl::InvalidArgumentError("synthetic adapter: dtype must be F32, F16 or BF16");
  }
  if (spec.targets.empty()) return absl::InvalidArgumentError("synthetic adapter: no targets");
  if (!(spec.relative_magnitude >= 0.0f) || !std::isfinite(spec.alpha)) {
    return absl::InvalidArgumentError("synthetic adapter: bad magnitude or alpha");
  }
  std::vector<int> layers = spec.layers;
  if (layers.empty()) {
    for (int l = 0; l < base.n_layers; ++l) layers.push_back(l);
  }
  for (int l : layers) {
    if (l < 0 || l >= base.n_layers) {
      return absl::InvalidArgumentError(
          absl::StrFormat("synthetic adapter: layer %d not in [0, %d)", l, base.n_layers));
    }
  }
  SyntheticAdapter out;
  out.spec = spec;
  out.spec.layers = layers;
  out.base = base;
  out.scale = spec.use_rslora ? spec.alpha / std::sqrt(static_cast<float>(spec.rank))
                              : spec.alpha / static_cast<float>(spec.rank);
  const int r = spec.rank;
  for (int l : layers) {
    for (LoraTarget t : kAllLoraTargets) {
      bool wanted = false;
      for (LoraTarget w : spec.targets) wanted |= (w == t);
      if (!wanted) continue;
      const ProjectionShape ps = BaseProjectionShape(base, t);
      SyntheticAdapter::Projection p;
      p.layer = l;
      p.target = t;
      p.h_in = ps.h_in;
      p.h_out = ps.h_out;
      auto it = spec.base_row_norm.find(t);
      const double row_norm =
          it != spec.base_row_norm.end() ? it->second : 0.02 * std::sqrt(double(ps.h_in));
      const double a_std = 1.0 / std::sqrt(double(ps.h_in));
      const double b_std = out.scale == 0.0f ? 0.0
                                             : spec.relative_magnitude * row_norm /
                                                   (std::fabs(out.scale) * std::sqrt(double(r)));
      Rng rng{spec.seed * 0x100000001B3ull + static_cast<uint64_t>(l) * 16 +
              static_cast<uint64_t>(t)};
      p.a.resize(static_cast<size_t>(r) * ps.h_in);
      p.b.resize(static_cast<size_t>(ps.h_out) * r);
      for (float& v : p.a) v = RoundTo(spec.dtype, static_cast<float>(rng.Normal() * a_std));
      for (float& v : p.b) v = RoundTo(spec.dtype, static_cast<float>(rng.Normal() * b_std));
      out.projections.push_back(std::move(p));
    }
  }
  return out;
}

absl::Status WritePeftAdapter(const SyntheticAdapter& ad, const std::string& dir) {
  if (absl::Status st = MakeDirs(dir); !st.ok()) return st;
  nlohmann::json cfg;
  std::vector<std::string> modules;
  for (LoraTarget t : kAllLoraTargets) {
    for (LoraTarget w : ad.spec.targets) {
      if (w == t) {
        modules.push_back(PeftModuleName(t));
        break;
      }
    }
  }
  cfg["peft_type"] = "LORA";
  cfg["task_type"] = "CAUSAL_LM";
  cfg["base_model_name_or_path"] = ad.spec.base_model_name;
  cfg["r"] = ad.spec.rank;
  cfg["lora_alpha"] = ad.spec.alpha;
  cfg["use_rslora"] = ad.spec.use_rslora;
  cfg["target_modules"] = modules;
  cfg["bias"] = "none";
  cfg["fan_in_fan_out"] = false;
  cfg["lora_dropout"] = 0.0;
  cfg["modules_to_save"] = nullptr;
  cfg["use_dora"] = false;
  cfg["init_lora_weights"] = true;
  cfg["inference_mode"] = true;
  cfg["rank_pattern"] = nlohmann::json::object();
  cfg["alpha_pattern"] = nlohmann::json::object();
  if (static_cast<int>(ad.spec.layers.size()) == ad.base.n_layers) {
    cfg["layers_to_transform"] = nullptr;
  } else {
    cfg["layers_to_transform"] = ad.spec.layers;
  }
  if (absl::Status st = WriteStringToFile(dir + "/adapter_config.json", cfg.dump(2) + "\n");
      !st.ok()) {
    return st;
  }
  std::vector<SafetensorsEntry> entries;
  const std::string dt(DTypeName(ad.spec.dtype));
  for (const SyntheticAdapter::Projection& p : ad.projections) {
    const std::string stem = "base_model.model." + PeftModulePath(p.layer, p.target);
    entries.push_back({stem + ".lora_A.weight", dt, {ad.spec.rank, p.h_in},
                       Encode(ad.spec.dtype, p.a)});
    entries.push_back({stem + ".lora_B.weight", dt, {p.h_out, ad.spec.rank},
                       Encode(ad.spec.dtype, p.b)});
  }
  return WriteSafetensors(dir + "/adapter_model.safetensors", entries, {{"format", "pt"}});
}

absl::Status WriteGgufLora(const SyntheticAdapter& ad, const std::string& path) {
  GgufWriter w(3);
  w.AddString("general.architecture", "llama");
  w.AddString("general.type", "adapter");
  w.AddString("general.name", "loom synthetic adapter");
  w.AddString("adapter.type", "lora");
  const float alpha = ad.spec.use_rslora
                          ? ad.spec.alpha * std::sqrt(static_cast<float>(ad.spec.rank))
                          : ad.spec.alpha;
  w.AddF32("adapter.lora.alpha", alpha);
  const int r = ad.spec.rank;
  const int64_t hd = ad.base.head_dim;
  for (const SyntheticAdapter::Projection& p : ad.projections) {
    const std::string stem =
        absl::StrFormat("blk.%d.%s.weight", p.layer, GgufTensorStem(p.target));
    std::vector<float> b = p.b;
    if (p.target == LoraTarget::kQ || p.target == LoraTarget::kK) {
      for (int64_t g = 0; g < p.h_out; ++g) {
        const int64_t src = HfRowOfGgufRow(g, hd);
        std::memcpy(&b[g * r], &p.b[src * r], sizeof(float) * r);
      }
    }
    if (absl::Status st = w.AddTensor(stem + ".lora_a", ad.spec.dtype, {r, p.h_in},
                                      Encode(ad.spec.dtype, p.a));
        !st.ok()) {
      return st;
    }
    if (absl::Status st =
            w.AddTensor(stem + ".lora_b", ad.spec.dtype, {p.h_out, r}, Encode(ad.spec.dtype, b));
        !st.ok()) {
      return st;
    }
  }
  return w.WriteFile(path);
}

}  // namespace loom
