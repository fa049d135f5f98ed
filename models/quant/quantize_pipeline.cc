#include "models/quant/quantize_pipeline.h"

#include <chrono>
#include <filesystem>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/thread_pool.h"
#include "models/eval/f32_model_source.h"
#include "models/llama/llama_model.h"
#include "models/quant/calibration_cache.h"
#include "models/quant/calibration_runner.h"
#include "models/quant/model_quantizer.h"
#include "models/quant/rotation_orders.h"
#include "models/quant/sha256.h"
#include "models/rotation/rotate_weights.h"
#include "models/tokenizer/tokenizer.h"
#include "models/weights/json_file.h"
#include "models/weights/model_source.h"

namespace loom::quant {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Cached statistics for the request, or NotFound. Without GPTQ a cache that also holds
// Hessians serves as well.
// Cached statistics, or NotFound. `suffix`: what else they depend on ("" or
// ";rotation=<fingerprint>"). Without `hessian` a cache that also holds Hessians serves.
absl::StatusOr<CalibrationStats> FromCache(const QuantizeRequest& r, const std::string& model_sha,
                                           const std::string& text_sha, const std::string& suffix,
                                           bool hessian, std::string* path_out,
                                           std::string* key_out) {
  *key_out = CalibrationCacheKey(model_sha, text_sha, r.sequences, r.seq_len, hessian) + suffix;
  *path_out = r.cache_dir + "/" + Sha256Hex(*key_out).substr(0, 24) + ".cal";
  absl::StatusOr<CalibrationStats> s = LoadCalibrationStats(*path_out, *key_out);
  if (s.ok() || hessian) return s;
  const std::string hkey =
      CalibrationCacheKey(model_sha, text_sha, r.sequences, r.seq_len, true) + suffix;
  const std::string hpath = r.cache_dir + "/" + Sha256Hex(hkey).substr(0, 24) + ".cal";
  absl::StatusOr<CalibrationStats> sh = LoadCalibrationStats(hpath, hkey);
  if (!sh.ok()) return s;
  *path_out = hpath;  // where the statistics came from (nothing is saved on a hit)
  return sh;
}

struct LoadedText {
  WeightedText in;
  std::string text;
  std::string sha256;
  int sequences = 0;
};

// Reads and checks every calibration text and splits the sequences over them.
absl::StatusOr<std::vector<LoadedText>> LoadTexts(const QuantizeRequest& r) {
  std::vector<WeightedText> in = r.calibration_texts;
  if (in.empty()) in.push_back({r.calibration_text, 1.0});
  std::vector<LoadedText> out;
  std::vector<double> weights;
  for (const WeightedText& t : in) {
    absl::StatusOr<std::string> text = ReadFileToString(t.path);
    if (!text.ok()) return text.status();
    if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
      return absl::InvalidArgumentError("calibration text " + t.path + " is empty");
    }
    LoadedText l{t, *std::move(text), "", 0};
    l.sha256 = Sha256Hex(l.text);
    out.push_back(std::move(l));
    weights.push_back(t.weight);
  }
  absl::StatusOr<std::vector<int>> split = SplitSequences(r.sequences, weights);
  if (!split.ok()) return split.status();
  for (size_t i = 0; i < out.size(); ++i) out[i].sequences = (*split)[i];
  return out;
}

// The provenance of the texts, and the "text" part of the statistics' cache key: for one
// text its sha256 (as before mixes existed), else a digest of every (sha256, share).
CalibrationRef DescribeTexts(const QuantizeRequest& r, const std::vector<LoadedText>& texts,
                             std::string* text_key) {
  CalibrationRef ref;
  ref.sequences = r.sequences;
  ref.seq_len = r.seq_len;
  ref.source = r.calibration_source;
  if (texts.size() == 1) {
    ref.text = texts[0].in.path;
    ref.sha256 = texts[0].sha256;
    *text_key = texts[0].sha256;
    return ref;
  }
  std::string mix;
  for (const LoadedText& t : texts) {
    ref.texts.push_back({t.in.path, t.sha256, t.in.weight, t.sequences});
    absl::StrAppend(&ref.text, ref.text.empty() ? "" : ",", t.in.path);
    absl::StrAppend(&ref.sha256, ref.sha256.empty() ? "" : ",", t.sha256);
    absl::StrAppend(&mix, t.sha256, ":", t.sequences, ";");
  }
  *text_key = "mix-" + Sha256Hex(mix);
  return ref;
}

// What the statistics of one calibration depend on, and where they are reported.
struct Calibrator {
  const QuantizeRequest& r;
  const std::vector<LoadedText>& texts;
  std::string model_sha, text_sha;
  kernels::Backend* backend;
  const std::function<void(const std::string&)>& say;

  absl::StatusOr<std::vector<std::vector<int32_t>>> Sequences(const Vocabulary& vocab) const {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(vocab);
    if (!tok.ok()) return tok.status();
    std::vector<std::vector<int32_t>> seqs;
    for (const LoadedText& t : texts) {
      absl::StatusOr<std::vector<std::vector<int32_t>>> s =
          CalibrationSequences(**tok, t.text, t.sequences, r.seq_len);
      if (!s.ok()) {
        return absl::Status(s.status().code(), t.in.path + ": " + std::string(s.status().message()));
      }
      say(absl::StrFormat("calibration text %s: %d sequences (weight %g)", t.in.path, t.sequences,
                          t.in.weight));
      for (auto& q : *s) seqs.push_back(std::move(q));
    }
    return seqs;
  }

  // The statistics from the cache (*model left null), or by running the model make()
  // builds (kept in *model) over the calibration sequences, then cached.
  absl::StatusOr<CalibrationStats> Run(
      const std::string& suffix, bool hessian,
      const std::function<absl::StatusOr<std::unique_ptr<LlamaModel>>()>& make,
      std::unique_ptr<LlamaModel>* model, QuantizeReport* report) const {
    std::string path, key;
    if (!r.cache_dir.empty()) {
      absl::StatusOr<CalibrationStats> st = FromCache(r, model_sha, text_sha, suffix, hessian, &path, &key);
      if (st.ok()) {
        say("calibration statistics from " + path);
        if (report) report->calibration_cached = true;
        return st;
      }
      if (st.status().code() != absl::StatusCode::kNotFound) {
        say("ignoring calibration cache: " + std::string(st.status().message()));
      }
    }
    absl::StatusOr<std::unique_ptr<LlamaModel>> m = make();
    if (!m.ok()) return m.status();
    *model = *std::move(m);
    absl::StatusOr<std::vector<std::vector<int32_t>>> seqs = Sequences((*model)->source().vocabulary());
    if (!seqs.ok()) return seqs.status();
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<CalibrationStats> st =
        RunCalibration(**model, *seqs, hessian, backend, [&](int done, int total) {
          say(absl::StrFormat("calibration %d/%d sequences (%.1f s)", done, total, Since(t0)));
        });
    if (!st.ok()) return st.status();
    if (report) report->calibration_seconds += Since(t0);
    if (!r.cache_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(r.cache_dir, ec);
      absl::Status s = SaveCalibrationStats(path, key, *st);
      say(s.ok() ? "calibration statistics cached in " + path
                 : "could not cache calibration statistics: " + std::string(s.message()));
    }
    return st;
  }
};

// The rotation spec of a request: its outlier counts are the INT8 channels' (one set for
// the residual: attn_norm and ffn_norm must agree).
absl::StatusOr<RotationSpec> RotationFor(const QuantOptions& o, const OutlierCounts& counts) {
  RotationSpec s = *o.rotation;
  const int an = counts[static_cast<int>(QuantActivation::kAttnNorm)];
  const int fn = counts[static_cast<int>(QuantActivation::kFfnNorm)];
  if (an != fn) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a rotated model keeps one set of residual outlier channels: the attn_norm (", an,
        ") and ffn_norm (", fn, ") outlier counts must be equal"));
  }
  s.residual_outliers = an;
  s.attn_out_outliers = counts[static_cast<int>(QuantActivation::kAttnOut)];
  s.silu_mul_outliers = counts[static_cast<int>(QuantActivation::kSiluMul)];
  if ((s.attn_out_outliers > 0 && !s.online_attn_out) ||
      (s.silu_mul_outliers > 0 && !s.online_silu_mul)) {
    return absl::InvalidArgumentError(
        "outlier channels of attn_out / silu_mul need its online rotation with --rotate");
  }
  return s;
}

// Folds o.rotation into f32 (the model `base` dequantized), with the orders of the channels
// it keeps out chosen on the unrotated model's energies (cached, or an energies-only
// calibration of a fresh F32 copy of base) when it keeps any; sets report->meta.rotation.
absl::StatusOr<std::shared_ptr<const ModelRotation>> FoldRotation(
    const QuantOptions& o, const OutlierCounts& counts, const Calibrator& cal,
    const ModelSource& base, ModelSource* f32, RotationOrders* orders, QuantizeReport* report,
    const std::function<void(const std::string&)>& say) {
  absl::StatusOr<RotationSpec> spec = RotationFor(o, counts);
  if (!spec.ok()) return spec.status();
  if (spec->residual_outliers > 0 || spec->attn_out_outliers > 0 || spec->silu_mul_outliers > 0) {
    say("rotation keeps outlier channels out: energies of the unrotated model first");
    std::unique_ptr<LlamaModel> unrotated;
    absl::StatusOr<CalibrationStats> plain = cal.Run("", false, [&] {
      absl::StatusOr<std::unique_ptr<ModelSource>> copy = DequantizeToF32(base);
      if (!copy.ok()) return absl::StatusOr<std::unique_ptr<LlamaModel>>(copy.status());
      return LlamaModel::Create(*std::move(copy), cal.backend);
    }, &unrotated, report);
    if (!plain.ok()) return plain.status();
    unrotated.reset();
    absl::StatusOr<RotationOrders> chosen = RotationOrdersFromStats(*plain, *spec, *f32);
    if (!chosen.ok()) return chosen.status();
    *orders = *std::move(chosen);
  }
  absl::StatusOr<std::shared_ptr<const ModelRotation>> rot = RotateF32Model(*spec, f32, *orders);
  if (!rot.ok()) return rot.status();
  report->meta.rotation = RotationMeta{*spec, (*rot)->Fingerprint()};
  say(absl::StrFormat("rotation: randomized Hadamard, seed %d, online attn_out %d silu_mul %d, "
                      "outliers kept out %d/%d/%d, fingerprint %s", spec->seed,
                      spec->online_attn_out, spec->online_silu_mul, spec->residual_outliers,
                      spec->attn_out_outliers, spec->silu_mul_outliers, (*rot)->Fingerprint()));
  return rot;
}

}  // namespace

absl::StatusOr<QuantizeReport> QuantizeToCheckpoint(
    const QuantizeRequest& r, const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& m) { if (log) log(m); };
  const QuantOptions& o = r.options;
  if (absl::Status s = ValidateClipSearch(o.clip_search); !s.ok()) return s;
  if (absl::Status s = ValidateGptqOptions(o); !s.ok()) return s;
  if (absl::Status s = ValidateOutlierSelection(o.outlier_selection); !s.ok()) return s;
  if (r.out_dir.empty()) return absl::InvalidArgumentError("no output directory given");
  for (const WeightedText& t : r.calibration_texts.empty()
                                   ? std::vector<WeightedText>{{r.calibration_text, 1.0}}
                                   : r.calibration_texts) {
    if (IsHeldOutName(t.path)) {
      return absl::InvalidArgumentError(
          "refusing to calibrate on " + std::filesystem::path(t.path).filename().string() +
          ": held-out texts (heldout*) are for evaluation only");
    }
  }
  absl::StatusOr<std::unique_ptr<ModelSource>> source = ModelSource::Open(r.model_path);
  if (!source.ok()) {
    return absl::Status(source.status().code(),
                        absl::StrCat("cannot quantize: ", source.status().message()));
  }
  const LlamaConfig config = (*source)->config();
  absl::StatusOr<OutlierCounts> counts = ResolveOutlierCounts(ActivationWidths(config), o);
  if (!counts.ok()) return counts.status();
  absl::StatusOr<std::vector<LoadedText>> texts = LoadTexts(r);
  if (!texts.ok()) return texts.status();

  QuantizeReport report;
  report.meta = MetaFor(o, *counts, config.n_layers);
  absl::StatusOr<FileDigest> model_digest = DigestPath(r.model_path);
  if (!model_digest.ok()) return model_digest.status();
  report.meta.base_model = {r.model_path, model_digest->sha256, model_digest->bytes};
  std::string text_sha;
  report.meta.calibration = DescribeTexts(r, *texts, &text_sha);
  say(absl::StrFormat("model %s (%d layers, sha256 %s), scheme %s, group %d, outliers %d/%d/%d/%d, gptq %d",
                      r.model_path, config.n_layers, model_digest->sha256.substr(0, 16),
                      std::string(kernels::quant::QuantSchemeName(o.scheme)), o.group_size, (*counts)[0],
                      (*counts)[1], (*counts)[2], (*counts)[3], o.gptq ? 1 : 0));

  kernels::ThreadPool pool(o.threads);
  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackendOnPool(&pool);
  const Calibrator cal{r, *texts, model_digest->sha256, text_sha, backend.get(), say};
  absl::StatusOr<std::unique_ptr<ModelSource>> f32 = DequantizeToF32(**source);
  if (!f32.ok()) return f32.status();
  std::shared_ptr<const ModelRotation> rotation;
  RotationOrders orders;
  if (o.rotation) {
    absl::StatusOr<std::shared_ptr<const ModelRotation>> rot =
        FoldRotation(o, *counts, cal, **source, f32->get(), &orders, &report, say);
    if (!rot.ok()) return rot.status();
    rotation = *std::move(rot);
  }
  const std::string cache_suffix = rotation ? ";rotation=" + rotation->Fingerprint() : "";
  source->reset();

  std::unique_ptr<LlamaModel> model;
  report.calibration_cached = false;
  absl::StatusOr<CalibrationStats> stats = cal.Run(cache_suffix, o.gptq, [&] {
    return rotation ? LlamaModel::CreateRotated(*std::move(f32), rotation, backend.get())
                    : LlamaModel::Create(*std::move(f32), backend.get());
  }, &model, &report);
  if (!stats.ok()) return stats.status();
  report.calibration_tokens = stats->tokens;
  const ModelSource& weights = model ? model->source() : **f32;

  const auto t1 = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<QuantizedLayer>> layers =
      QuantizeModel(weights, *stats, report.meta, o, [&](int done, int total) {
        say(absl::StrFormat("quantized layer %d/%d (%.1f s)", done, total, Since(t1)));
      }, &report.output_error, &orders);
  if (!layers.ok()) return layers.status();
  report.quantize_seconds = Since(t1);
  report.has_output_error = stats->has_hessian;
  if (absl::Status s = WriteQuantizedCheckpoint(r.out_dir, report.meta, *layers); !s.ok()) return s;
  std::error_code ec;
  report.safetensors_bytes = static_cast<int64_t>(
      std::filesystem::file_size(r.out_dir + "/" + kQuantTensorsName, ec));
  return report;
}

}  // namespace loom::quant
