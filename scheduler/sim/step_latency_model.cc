#include "scheduler/sim/step_latency_model.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

// GPU preset: an A100-80GB (HBM2e, 2.0 TB/s peak, 312 TFLOP/s FP16) serving Llama-2-7B in
// FP16 with rank-16 LoRA, as in Punica (MLSys'24). Punica's central measurement is that a
// decode step is bound by reading the weights once, so its latency barely grows with the
// batch up to 32; consolidating requests into full batches therefore frees whole GPUs.
// The coefficients follow that roofline (sources per line):
//  - base_ms 12.2 = 11 ms to read 13.5 GB of FP16 weights (~1.5 TB/s effective, 9 ms, plus
//    kernel launches; ASSUMPTION: the paper excerpt we have gives no batch-1 step time)
//    + 1.2 ms of LoRA: Punica's LoRA operator takes 37 us per layer at batch 1 and 40 us
//    at batch 64 (Identical), i.e. a per-step constant, x 32 layers.
//  - ms_per_kv_token 0.00035: attention reads each context token's K and V, 512 KiB per
//    token (2 x 32 layers x 4096 x FP16), at ~1.5 TB/s. This is what grows with the batch.
//  - decode_ms_per_token 0.045: 14 GFLOP per token at 312 TFLOP/s. Below the ridge point
//    this compute overlaps the weight read; adding it is pessimistic for big batches.
//  - ms_per_distinct_adapter 0.039: Punica's Distinct LoRA operator grows from 40 us to
//    116 us over batch 64, ~1.2 us per extra adapter per layer, x 32 layers.
//  - prefill_ms_per_token 0.1: ASSUMPTION, ~14 GFLOP per token at ~140 TFLOP/s achieved.
//  - adapter_load_ms 2: Punica's ~2 ms host-to-device copy per adapter (charged to the
//    step here; Punica overlaps it, so this is pessimistic for Distinct).
//  - kv_pages 7000 x 16 tokens: ~55 GB of KV at 512 KiB per token left after weights,
//    workspace and an 8 GB adapter cache (100 x 80 MB).
// Resulting steps: batch 1 at 330 tokens of context 12.4 ms; batch 32 at 330 tokens 17.4
// ms (1.4x for 32x the tokens). Cross-check against Punica's end-to-end 1044 tok/s
// (batch 32, Identical): with its benchmark's lengths (mean context during decode ~680
// tokens) this model gives 21.3 ms per batch-32 step, ~1500 tok/s, i.e. 1.45x the
// published figure; the rest of Punica's measured time (prefill interleaving, batches
// below 32 while the queue drains, attention below peak bandwidth) is not in the excerpt
// we have, and it is not attributed to the batch size here. The previous preset did so
// (0.613 ms per decode token, batch 32 = 2.6x batch 1), contradicting the paper's own
// batching measurement.
WorkerHardware GpuPreset() {
  WorkerHardware h;
  h.name = "gpu (A100-80GB, Llama-2-7B FP16; roofline from Punica's figures)";
  h.latency.base_ms = 12.2;
  h.latency.decode_ms_per_token = 0.045;
  h.latency.prefill_ms_per_token = 0.1;
  h.latency.ms_per_distinct_adapter = 0.039;
  h.latency.adapter_load_ms = 2.0;
  h.latency.ms_per_kv_token = 0.00035;
  h.kv_pages = 7000;
  h.max_batch_tokens = 4096;
  h.adapter_cache_slots = 100;
  return h;
}

// CPU preset, DEFAULTS: SmolLM2-135M Q4_1 on 2 Zen 4 cores, from llama.cpp's measured
// figures in KERNELS.md, standing in for the engine's own step times:
//  - base_ms 7: batch-1 decode at 134-152 tok/s.
//  - decode_ms_per_token 3.8: 32 parallel sequences at 245-254 tok/s aggregate is
//    ~128 ms per step; (128 - 7) / 32.
//  - prefill_ms_per_token 3.3: prefill at 292-324 tok/s.
//  - ms_per_distinct_adapter 0.36: a rank-16 adapter on all seven projections is ~9.8 MB
//    (FP16), read once per step at ~27 GB/s.
//  - adapter_load_ms 0: adapters already sit in host memory.
//  - kv_pages 1456: the engine's default 512 MiB KV budget at 23,040 bytes per token
//    (30 layers x K,V x 3 KV heads x 64 x FP16).
//  - max_batch_tokens 512: the engine's default step budget.
//  - ms_per_kv_token 0: not separated from the per-token terms; fit it from measured steps.
WorkerHardware CpuPreset() {
  WorkerHardware h;
  h.name = "cpu (SmolLM2-135M Q4_1, 2 cores; DEFAULT coefficients from llama.cpp figures)";
  h.latency = {7.0, 3.8, 3.3, 0.36, 0.0};
  h.kv_pages = 1456;
  h.max_batch_tokens = 512;
  h.adapter_cache_slots = 1 << 20;
  return h;
}

constexpr int kCoefficients = 5;  // base, decode, prefill, distinct, kv

std::array<double, kCoefficients> Row(const MeasuredStep& s) {
  return {1.0, static_cast<double>(s.decode_tokens), static_cast<double>(s.prefill_tokens),
          static_cast<double>(s.distinct_adapters), static_cast<double>(s.kv_tokens)};
}

// Solves a (n x n) * x = b in place by Gaussian elimination with partial pivoting.
bool Solve(std::vector<std::vector<double>>& a, std::vector<double>& b) {
  const int n = static_cast<int>(b.size());
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    }
    if (std::fabs(a[p][c]) < 1e-9) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = 0; c < n; ++c) b[c] /= a[c][c];
  return true;
}

template <typename T>
absl::Status Read(const nlohmann::json& j, const char* key, T* out) {
  if (!j.contains(key)) return absl::OkStatus();
  const auto& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return absl::InvalidArgumentError(absl::StrCat(key, " must be a string"));
  } else {
    if (!v.is_number()) return absl::InvalidArgumentError(absl::StrCat(key, " must be a number"));
  }
  *out = v.get<T>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkerHardware> HardwarePreset(std::string_view mode) {
  if (mode == "gpu") return GpuPreset();
  if (mode == "cpu") return CpuPreset();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown hardware mode '", std::string(mode), "' (expected gpu or cpu)"));
}

absl::StatusOr<StepLatencyModel> FitStepLatency(absl::Span<const MeasuredStep> steps,
                                                const StepLatencyModel& prior) {
  const std::array<double, kCoefficients> prior_coef = {
      prior.base_ms, prior.decode_ms_per_token, prior.prefill_ms_per_token,
      prior.ms_per_distinct_adapter, prior.ms_per_kv_token};
  // Column 0 (intercept) is always fitted; others only if they vary.
  std::vector<int> fitted = {0};
  for (int c = 1; c < kCoefficients; ++c) {
    for (const MeasuredStep& s : steps) {
      if (Row(s)[c] != Row(steps[0])[c]) {
        fitted.push_back(c);
        break;
      }
    }
  }
  const int n = static_cast<int>(fitted.size());
  if (static_cast<int>(steps.size()) < n) {
    return absl::InvalidArgumentError(absl::StrCat("need at least ", n,
                                                   " measured steps to fit, got ", steps.size()));
  }
  std::vector<std::vector<double>> ata(n, std::vector<double>(n, 0.0));
  std::vector<double> atb(n, 0.0);
  for (const MeasuredStep& s : steps) {
    const auto row = Row(s);
    double y = s.step_ms;
    for (int c = 1; c < kCoefficients; ++c) {
      if (std::find(fitted.begin(), fitted.end(), c) == fitted.end()) y -= prior_coef[c] * row[c];
    }
    for (int i = 0; i < n; ++i) {
      atb[i] += row[fitted[i]] * y;
      for (int k = 0; k < n; ++k) ata[i][k] += row[fitted[i]] * row[fitted[k]];
    }
  }
  if (!Solve(ata, atb)) {
    return absl::InvalidArgumentError("measured steps do not determine the step model "
                                      "(columns are linearly dependent)");
  }
  std::array<double, kCoefficients> coef = prior_coef;
  for (int i = 0; i < n; ++i) coef[fitted[i]] = atb[i];
  StepLatencyModel m = prior;
  m.base_ms = coef[0];
  m.decode_ms_per_token = coef[1];
  m.prefill_ms_per_token = coef[2];
  m.ms_per_distinct_adapter = coef[3];
  m.ms_per_kv_token = coef[4];
  return m;
}

absl::StatusOr<WorkerHardware> HardwareFromJson(std::string_view json, WorkerHardware h) {
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("hardware JSON must be an object");
  }
  StepLatencyModel& m = h.latency;
  for (const absl::Status& s :
       {Read(j, "name", &h.name), Read(j, "base_ms", &m.base_ms),
        Read(j, "decode_ms_per_token", &m.decode_ms_per_token),
        Read(j, "prefill_ms_per_token", &m.prefill_ms_per_token),
        Read(j, "ms_per_distinct_adapter", &m.ms_per_distinct_adapter),
        Read(j, "adapter_load_ms", &m.adapter_load_ms),
        Read(j, "ms_per_kv_token", &m.ms_per_kv_token), Read(j, "kv_pages", &h.kv_pages),
        Read(j, "kv_page_size", &h.kv_page_size),
        Read(j, "max_batch_tokens", &h.max_batch_tokens),
        Read(j, "adapter_cache_slots", &h.adapter_cache_slots)}) {
    if (!s.ok()) return s;
  }
  if (j.contains("measured_steps")) {
    const auto& rows = j.at("measured_steps");
    if (!rows.is_array()) return absl::InvalidArgumentError("measured_steps must be an array");
    std::vector<MeasuredStep> steps;
    for (const auto& r : rows) {
      if (!r.is_object()) return absl::InvalidArgumentError("measured_steps rows are objects");
      MeasuredStep s;
      for (const absl::Status& st :
           {Read(r, "decode_tokens", &s.decode_tokens), Read(r, "prefill_tokens", &s.prefill_tokens),
            Read(r, "distinct_adapters", &s.distinct_adapters),
            Read(r, "kv_tokens", &s.kv_tokens), Read(r, "step_ms", &s.step_ms)}) {
        if (!st.ok()) return st;
      }
      steps.push_back(s);
    }
    absl::StatusOr<StepLatencyModel> fit = FitStepLatency(steps, m);
    if (!fit.ok()) return fit.status();
    m = *fit;
  }
  if (h.kv_pages < 1 || h.kv_page_size < 1 || h.max_batch_tokens < 1 ||
      h.adapter_cache_slots < 1 || m.base_ms <= 0 || m.decode_ms_per_token < 0 ||
      m.prefill_ms_per_token < 0 || m.ms_per_distinct_adapter < 0 || m.adapter_load_ms < 0 ||
      m.ms_per_kv_token < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hardware out of range: kv_pages ", h.kv_pages, ", kv_page_size ", h.kv_page_size,
        ", max_batch_tokens ", h.max_batch_tokens, ", adapter_cache_slots ",
        h.adapter_cache_slots, ", base_ms ", m.base_ms, " (must be > 0; other ms >= 0)"));
  }
  return h;
}

}  // namespace loom
