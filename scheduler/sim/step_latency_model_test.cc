#include "scheduler/sim/step_latency_model.h"

#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

StepShape Decode(int batch, int context, int adapters) {
  StepShape s;
  s.decode_tokens = batch;
  s.distinct_adapters = adapters;
  s.kv_tokens = int64_t{batch} * context;
  return s;
}

// Punica's batching fact: a decode step is bound by the weight read, so 32 sequences cost
// far less than 32 single steps (here < 1.5x one step at ShareGPT-like contexts), and
// Distinct stays within 10% of Identical.
TEST(StepLatencyModel, GpuPresetDecodeBarelyGrowsWithTheBatch) {
  const WorkerHardware gpu = *HardwarePreset("gpu");
  const double one = gpu.latency.StepMs(Decode(1, 330, 1));
  const double full = gpu.latency.StepMs(Decode(32, 330, 1));
  EXPECT_GT(full, one);
  EXPECT_LT(full, 1.5 * one);
  EXPECT_LT(gpu.latency.StepMs(Decode(32, 330, 32)), 1.1 * full);
  // The derivation in step_latency_model.cc: 12.2 + 32 * 0.045 + 0.039 + 32 * 680 * 0.00035.
  EXPECT_NEAR(gpu.latency.StepMs(Decode(32, 680, 1)), 21.295, 1e-9);
  EXPECT_EQ(HardwarePreset("tpu").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FitStepLatency, RecoversCoefficientsFromExactSteps) {
  StepLatencyModel truth{5.0, 2.0, 0.5, 0.25, 0.0};
  truth.ms_per_kv_token = 0.01;
  std::vector<MeasuredStep> steps;
  for (int d : {1, 8, 32}) {
    for (int p : {0, 100}) {
      for (int a : {1, 4}) {
        for (int ctx : {50, 300}) {
          StepShape shape{d, p, a, 0, int64_t{d} * ctx + p};
          MeasuredStep m{d, p, a, truth.StepMs(shape)};
          m.kv_tokens = shape.kv_tokens;
          steps.push_back(m);
        }
      }
    }
  }
  absl::StatusOr<StepLatencyModel> fit = FitStepLatency(steps, StepLatencyModel{});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->base_ms, 5.0, 1e-6);
  EXPECT_NEAR(fit->decode_ms_per_token, 2.0, 1e-6);
  EXPECT_NEAR(fit->prefill_ms_per_token, 0.5, 1e-6);
  EXPECT_NEAR(fit->ms_per_distinct_adapter, 0.25, 1e-6);
  EXPECT_NEAR(fit->ms_per_kv_token, 0.01, 1e-9);
}

TEST(FitStepLatency, ConstantColumnsKeepThePrior) {
  // Decode-only table with one adapter throughout: prefill and adapter terms cannot be
  // fitted, so they come from the prior and the rest absorbs nothing of them.
  StepLatencyModel prior{0, 0, 3.3, 0.36, 0};
  std::vector<MeasuredStep> steps = {{1, 0, 1, 7.0 + 3.8 + 0.36}, {32, 0, 1, 7.0 + 3.8 * 32 + 0.36}};
  absl::StatusOr<StepLatencyModel> fit = FitStepLatency(steps, prior);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->base_ms, 7.0, 1e-6);
  EXPECT_NEAR(fit->decode_ms_per_token, 3.8, 1e-6);
  EXPECT_EQ(fit->prefill_ms_per_token, 3.3);
  EXPECT_EQ(fit->ms_per_distinct_adapter, 0.36);
  EXPECT_EQ(FitStepLatency({{4, 0, 1, 9.0}, {4, 10, 1, 12.0}, {8, 0, 2, 9.0}}, prior)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);  // 4 unknowns, 3 rows
}

TEST(HardwareFromJson, OverridesAndFits) {
  const WorkerHardware cpu = *HardwarePreset("cpu");
  absl::StatusOr<WorkerHardware> h = HardwareFromJson(
      R"({"name": "measured", "kv_pages": 999, "adapter_load_ms": 1.5,
          "measured_steps": [{"decode_tokens": 1, "step_ms": 10},
                             {"decode_tokens": 11, "step_ms": 30}]})",
      cpu);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->name, "measured");
  EXPECT_EQ(h->kv_pages, 999);
  EXPECT_EQ(h->latency.adapter_load_ms, 1.5);
  EXPECT_NEAR(h->latency.decode_ms_per_token, 2.0, 1e-9);
  EXPECT_NEAR(h->latency.base_ms, 8.0, 1e-9);
  EXPECT_EQ(h->max_batch_tokens, cpu.max_batch_tokens);
  for (const char* bad : {"[1]", "{\"kv_pages\": \"many\"}", "{\"kv_pages\": 0}", "{",
                          "{\"measured_steps\": 3}"}) {
    EXPECT_EQ(HardwareFromJson(bad, cpu).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace loom
