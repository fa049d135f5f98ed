// loom_quantize: Atom-style calibrated quantization of a Llama model into a Loom quantized
// checkpoint (models/quant/quantized_checkpoint.h).
//
//   loom_quantize --out DIR [--model PATH] [--calibration_text FILE[:W],FILE[:W],...]
//                 [--scheme w4a4] [--rotate [--rotation_seed 0] [--online_attn_out]
//                 [--online_silu_mul]]
//                 [--gptq] [--sequences 32] [--seq_len 512] [--group_size 128]
//                 [--outliers 128] [--outliers_attn_norm -1] [--outliers_attn_out -1]
//                 [--outliers_ffn_norm -1] [--outliers_silu_mul -1]
//                 [--clip_search] [--clip_min 0.5] [--clip_steps 20] [--gptq_damp 0.01]
//                 [--gptq_act_order] [--gptq_static_groups] [--gptq_hessian_scale_search]
//                 [--w4_full_range] [--outlier_selection energy|owq] [--refit_scales]
//                 [--cache_dir DIR] [--threads 2]
//
// Calibration runs the model dequantized to F32 on the CPU backend. Exit status 1 with a
// message on any error.
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "kernels/quant/atom_format.h"
#include "models/default_model.h"
#include "models/quant/quantize_pipeline.h"

ABSL_FLAG(std::string, model, "", "GGUF file or HF directory (default: the default model)");
ABSL_FLAG(std::string, calibration_text, "",
          "calibration text, or several mixed by weight: a.txt:2,b.txt:1,c.txt (weight 1 when "
          "omitted; default: calibration.txt beside the default model, in eval/)");
ABSL_FLAG(std::string, calibration_source, loom::quant::kJaneAustenSource,
          "provenance of the calibration text, recorded in loom_quant.json");
ABSL_FLAG(std::string, out, "", "output directory (required)");
ABSL_FLAG(std::string, scheme, "w4a4", "w4a4, w4a8 or w8a8");
ABSL_FLAG(bool, gptq, false, "GPTQ instead of per-group clip search / RTN");
ABSL_FLAG(int, sequences, 32, "calibration sequences");
ABSL_FLAG(int, seq_len, 512, "tokens per calibration sequence");
ABSL_FLAG(int, group_size, 128, "quantization group along K (positive, even)");
ABSL_FLAG(int, outliers, 128,
          "outlier channels of an activation whose width is a multiple of the group");
ABSL_FLAG(int, outliers_attn_norm, -1, "outliers of the q/k/v input (-1: automatic)");
ABSL_FLAG(int, outliers_attn_out, -1, "outliers of the o_proj input (-1: automatic)");
ABSL_FLAG(int, outliers_ffn_norm, -1, "outliers of the gate/up input (-1: automatic)");
ABSL_FLAG(int, outliers_silu_mul, -1, "outliers of the down_proj input (-1: automatic)");
ABSL_FLAG(bool, clip_search, true, "search the weight clip ratio per (row, group)");
ABSL_FLAG(double, clip_min, 0.5, "smallest clip ratio tried");
ABSL_FLAG(int, clip_steps, 20, "clip ratios tried, 1.0 down to --clip_min");
ABSL_FLAG(double, gptq_damp, 0.01, "GPTQ damping, times the mean Hessian diagonal");
ABSL_FLAG(bool, gptq_act_order, false,
          "GPTQ visits the normal columns by descending diag(H) (outliers still last)");
ABSL_FLAG(bool, gptq_static_groups, false,
          "GPTQ fixes every group scale before the sweep, from the original weights");
ABSL_FLAG(bool, gptq_hessian_scale_search, false,
          "GPTQ picks each group's clip ratio by the group's GPTQ loss (natural order)");
ABSL_FLAG(bool, w4_full_range, false,
          "4-bit weight codes in [-8, 7] (the format's full nibble range) instead of [-7, 7]");
ABSL_FLAG(std::string, outlier_selection, "energy",
          "outlier channels by activation energy (Atom) or by energy x 4-bit weight error (OWQ)");
ABSL_FLAG(bool, refit_scales, false,
          "after the codes are chosen, refit each row's scales by least squares against the "
          "calibration Hessian (needs --gptq)");
ABSL_FLAG(std::string, cache_dir, "",
          "calibration statistics cache (default: quant/calib beside the default model; "
          "'none' disables)");
ABSL_FLAG(bool, rotate, false,
          "QuaRot: fold a randomized-Hadamard rotation of the residual stream (and the RMSNorm "
          "scales) into the model before calibration; writes a version-2 (rotated) checkpoint");
ABSL_FLAG(uint64_t, rotation_seed, 0, "with --rotate: the residual rotation's random signs");
ABSL_FLAG(bool, online_attn_out, true, "with --rotate: online Hadamard on o_proj's input");
ABSL_FLAG(bool, online_silu_mul, true, "with --rotate: online Hadamard on down_proj's input");
ABSL_FLAG(int, threads, 2, "CPU threads");

namespace loom::quant {
namespace {

std::string Dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

absl::Status Run() {
  QuantizeRequest r;
  r.model_path = absl::GetFlag(FLAGS_model);
  if (r.model_path.empty()) r.model_path = DefaultModelPath();
  const std::string cache_root = Dir(DefaultModelPath());
  r.calibration_text = absl::GetFlag(FLAGS_calibration_text);
  if (r.calibration_text.empty()) r.calibration_text = cache_root + "/eval/calibration.txt";
  absl::StatusOr<std::vector<WeightedText>> texts = ParseWeightedTexts(r.calibration_text);
  if (!texts.ok()) return texts.status();
  r.calibration_texts = *std::move(texts);
  r.calibration_source = absl::GetFlag(FLAGS_calibration_source);
  r.out_dir = absl::GetFlag(FLAGS_out);
  if (r.out_dir.empty()) return absl::InvalidArgumentError("--out is required");
  r.sequences = absl::GetFlag(FLAGS_sequences);
  r.seq_len = absl::GetFlag(FLAGS_seq_len);
  r.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  if (r.cache_dir.empty()) r.cache_dir = cache_root + "/quant/calib";
  if (r.cache_dir == "none") r.cache_dir.clear();
  QuantOptions& o = r.options;
  absl::StatusOr<kernels::quant::QuantScheme> scheme =
      kernels::quant::ParseQuantScheme(absl::GetFlag(FLAGS_scheme));
  if (!scheme.ok()) return scheme.status();
  o.scheme = *scheme;
  o.gptq = absl::GetFlag(FLAGS_gptq);
  o.group_size = absl::GetFlag(FLAGS_group_size);
  o.default_outliers = absl::GetFlag(FLAGS_outliers);
  o.outliers = {absl::GetFlag(FLAGS_outliers_attn_norm), absl::GetFlag(FLAGS_outliers_attn_out),
                absl::GetFlag(FLAGS_outliers_ffn_norm), absl::GetFlag(FLAGS_outliers_silu_mul)};
  o.clip_search = {absl::GetFlag(FLAGS_clip_search), absl::GetFlag(FLAGS_clip_min),
                   absl::GetFlag(FLAGS_clip_steps)};
  o.gptq_damp = absl::GetFlag(FLAGS_gptq_damp);
  o.gptq_act_order = absl::GetFlag(FLAGS_gptq_act_order);
  o.gptq_static_groups = absl::GetFlag(FLAGS_gptq_static_groups);
  o.gptq_hessian_scale_search = absl::GetFlag(FLAGS_gptq_hessian_scale_search);
  o.w4_full_range = absl::GetFlag(FLAGS_w4_full_range);
  o.outlier_selection = absl::GetFlag(FLAGS_outlier_selection);
  o.refit_scales = absl::GetFlag(FLAGS_refit_scales);
  if (absl::GetFlag(FLAGS_rotate)) {
    o.rotation = RotationSpec{absl::GetFlag(FLAGS_rotation_seed), absl::GetFlag(FLAGS_online_attn_out),
                              absl::GetFlag(FLAGS_online_silu_mul)};
  }
  o.threads = absl::GetFlag(FLAGS_threads);
  if (o.threads < 1) return absl::InvalidArgumentError("--threads must be >= 1");
  absl::StatusOr<QuantizeReport> rep = QuantizeToCheckpoint(
      r, [](const std::string& m) { std::fprintf(stderr, "loom_quantize: %s\n", m.c_str()); });
  if (!rep.ok()) return rep.status();
  std::printf("checkpoint:        %s\n", r.out_dir.c_str());
  std::printf("scheme:            %s%s, group %d, outliers attn_norm %d attn_out %d ffn_norm %d silu_mul %d\n",
              std::string(kernels::quant::QuantSchemeName(rep->meta.scheme)).c_str(),
              rep->meta.gptq ? " + gptq" : "", rep->meta.group_size, rep->meta.outliers[0],
              rep->meta.outliers[1], rep->meta.outliers[2], rep->meta.outliers[3]);
  const GptqMeta& g = rep->meta.gptq_options;
  std::printf("options:           gptq damp %g act_order %d static_groups %d hessian_scale_search %d, w4_full_range %d, outliers by %s, refit_scales %d\n",
              g.damp, g.act_order, g.static_groups, g.hessian_scale_search,
              rep->meta.w4_full_range, rep->meta.outlier_selection.c_str(),
              rep->meta.refit_scales);
  if (rep->has_output_error) {
    const OutputErrorStats& e = rep->output_error;
    double num = 0, den = 0;
    std::string per;
    for (int p = 0; p < kNumQuantProjections; ++p) {
      num += e.num[p];
      den += e.den[p];
      per += absl::StrFormat(" %s %.4f", QuantProjectionName(static_cast<QuantProjection>(p)),
                             e.den[p] > 0 ? std::sqrt(e.num[p] / e.den[p]) : 0.0);
    }
    std::printf("output error:      %.4f (sqrt(sum d'Hd / sum w'Hw), every %dth row;%s)\n",
                den > 0 ? std::sqrt(num / den) : 0.0, OutputErrorStats::kErrorRowStride,
                per.c_str());
  }
  if (rep->meta.rotation) {
    const RotationMeta& rm = *rep->meta.rotation;
    std::printf("rotation:          randomized Hadamard, seed %llu, online attn_out %d silu_mul %d, fingerprint %s\n",
                static_cast<unsigned long long>(rm.spec.seed), rm.spec.online_attn_out,
                rm.spec.online_silu_mul, rm.fingerprint.c_str());
  }
  for (const CalibrationText& t : rep->meta.calibration.texts) {
    std::printf("calibration text:  %s (weight %g, %d sequences)\n", t.path.c_str(), t.weight,
                t.sequences);
  }
  std::printf("calibration:       %lld tokens (%d x %d), %s, %.1f s\n",
              static_cast<long long>(rep->calibration_tokens), r.sequences, r.seq_len,
              rep->calibration_cached ? "cached" : "computed", rep->calibration_seconds);
  std::printf("quantization:      %.1f s\n", rep->quantize_seconds);
  std::printf("model.safetensors: %lld bytes\n", static_cast<long long>(rep->safetensors_bytes));
  return absl::OkStatus();
}

}  // namespace
}  // namespace loom::quant

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = loom::quant::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "loom_quantize: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
