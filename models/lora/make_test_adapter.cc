// make_test_adapter: writes a seeded synthetic LoRA adapter for a base model, in real PEFT
// format (adapter_config.json + adapter_model.safetensors) and/or as a llama.cpp GGUF-LoRA
// file, for tests and benchmarks. Magnitudes follow peft_writer.h, with each target's
// base row norm measured from the base model's weights so the adapter visibly changes
// greedy output at the default --magnitude 0.05 (0.2: far from the base).
//
//   make_test_adapter --base=model.gguf --out=/tmp/adapter [--gguf_out=/tmp/adapter.gguf]
//     [--rank=16] [--alpha=32] [--rslora] [--targets=q_proj,k_proj,...] [--layers=0,1,2]
//     [--seed=1] [--dtype=f32|f16|bf16] [--magnitude=0.05]
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "kernels/dtype.h"
#include "models/lora/lora_adapter.h"
#include "models/lora/peft_writer.h"
#include "models/weights/model_source.h"

ABSL_FLAG(std::string, base, "", "base model (GGUF file or HF directory)");
ABSL_FLAG(std::string, out, "", "PEFT adapter directory to write (empty: none)");
ABSL_FLAG(std::string, gguf_out, "", "GGUF-LoRA file to write (empty: none)");
ABSL_FLAG(int, rank, 16, "LoRA rank r");
ABSL_FLAG(double, alpha, 32.0, "lora_alpha");
ABSL_FLAG(bool, rslora, false, "use_rslora (scale alpha / sqrt(r))");
ABSL_FLAG(std::string, targets, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
          "comma-separated PEFT module names");
ABSL_FLAG(std::string, layers, "", "comma-separated layer numbers (empty: all)");
ABSL_FLAG(uint64_t, seed, 1, "random seed");
ABSL_FLAG(std::string, dtype, "f32", "tensor type written: f32, f16 or bf16");
ABSL_FLAG(double, magnitude, 0.05,
          "row norm of scale*B*A relative to the base projection's mean row norm");
ABSL_FLAG(std::string, base_model_name, "HuggingFaceTB/SmolLM2-135M-Instruct",
          "base_model_name_or_path written to adapter_config.json");

namespace loom {
namespace {

// Mean row norm of blk.L.<stem>.weight over the adapter's layers (up to 64 rows each).
float MeanRowNorm(const ModelSource& src, LoraTarget t, const std::vector<int>& layers) {
  double sum = 0;
  int n = 0;
  for (int l : layers) {
    auto w = src.Tensor(absl::StrFormat("blk.%d.%s.weight", l, GgufTensorStem(t)));
    if (!w.ok() || (*w)->shape.size() != 2) continue;
    const WeightTensor& wt = **w;
    std::vector<float> row(wt.cols());
    const int64_t step = std::max<int64_t>(1, wt.rows() / 64);
    for (int64_t r = 0; r < wt.rows(); r += step) {
      DequantizeRow(wt.dtype, wt.data + r * wt.row_bytes(), row.data(), wt.cols());
      double s = 0;
      for (float v : row) s += double(v) * v;
      sum += std::sqrt(s);
      ++n;
    }
  }
  return n == 0 ? 0.0f : static_cast<float>(sum / n);
}

int Run() {
  const std::string base_path = absl::GetFlag(FLAGS_base);
  if (base_path.empty() || (absl::GetFlag(FLAGS_out).empty() &&
                            absl::GetFlag(FLAGS_gguf_out).empty())) {
    std::fprintf(stderr, "usage: make_test_adapter --base=MODEL --out=DIR [--gguf_out=FILE] "
                         "[--rank --alpha --rslora --targets --layers --seed --dtype "
                         "--magnitude]\n");
    return 2;
  }
  auto src = ModelSource::Open(base_path);
  if (!src.ok()) {
    std::fprintf(stderr, "%s\n", std::string(src.status().message()).c_str());
    return 1;
  }
  const LlamaConfig& base = (*src)->config();
  SyntheticAdapterSpec spec;
  spec.rank = absl::GetFlag(FLAGS_rank);
  spec.alpha = static_cast<float>(absl::GetFlag(FLAGS_alpha));
  spec.use_rslora = absl::GetFlag(FLAGS_rslora);
  spec.seed = absl::GetFlag(FLAGS_seed);
  spec.relative_magnitude = static_cast<float>(absl::GetFlag(FLAGS_magnitude));
  spec.base_model_name = absl::GetFlag(FLAGS_base_model_name);
  const std::string dt = absl::GetFlag(FLAGS_dtype);
  if (dt == "f32") {
    spec.dtype = DType::kF32;
  } else if (dt == "f16") {
    spec.dtype = DType::kF16;
  } else if (dt == "bf16") {
    spec.dtype = DType::kBF16;
  } else {
    std::fprintf(stderr, "--dtype must be f32, f16 or bf16\n");
    return 2;
  }
  spec.targets.clear();
  for (const std::string& name : std::vector<std::string>(
       absl::StrSplit(absl::GetFlag(FLAGS_targets), ',', absl::SkipEmpty()))) {
    auto t = LoraTargetFromPeftName(name);
    if (!t.has_value()) {
      std::fprintf(stderr, "unknown target '%s'\n", name.c_str());
      return 2;
    }
    spec.targets.push_back(*t);
  }
  for (const std::string& s : std::vector<std::string>(
       absl::StrSplit(absl::GetFlag(FLAGS_layers), ',', absl::SkipEmpty()))) {
    int l;
    if (!absl::SimpleAtoi(s, &l)) {
      std::fprintf(stderr, "bad layer '%s'\n", s.c_str());
      return 2;
    }
    spec.layers.push_back(l);
  }
  std::vector<int> layers = spec.layers;
  if (layers.empty()) {
    for (int l = 0; l < base.n_layers; ++l) layers.push_back(l);
  }
  for (LoraTarget t : spec.targets) {
    const float norm = MeanRowNorm(**src, t, layers);
    if (norm > 0) spec.base_row_norm[t] = norm;
  }
  auto ad = MakeSyntheticAdapter(base, spec);
  if (!ad.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ad.status().message()).c_str());
    return 1;
  }
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty()) {
    if (absl::Status st = WritePeftAdapter(*ad, out); !st.ok()) {
      std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
      return 1;
    }
    std::printf("wrote PEFT adapter %s\n", out.c_str());
  }
  if (const std::string out = absl::GetFlag(FLAGS_gguf_out); !out.empty()) {
    if (absl::Status st = WriteGgufLora(*ad, out); !st.ok()) {
      std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
      return 1;
    }
    std::printf("wrote GGUF-LoRA %s\n", out.c_str());
  }
  size_t params = 0;
  for (const auto& p : ad->projections) params += p.a.size() + p.b.size();
  std::printf("rank %d, scale %g, %zu projections, %zu parameters\n", spec.rank, ad->scale,
              ad->projections.size(), params);
  for (const auto& [t, n] : spec.base_row_norm) {
    std::printf("  %s: base row norm %.4f\n", PeftModuleName(t), n);
  }
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return loom::Run();
}
