#include "scheduler/sim/step_latency_model.h"

#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

TEST(StepLatencyModel, GpuPresetReproducesPunicasBatch32Throughput) {
  const WorkerHardware gpu = *HardwarePreset("gpu");
  // Batch 32 decode, one adapter (Identical): Punica reports 1044 tok/s.
  const double ms = gpu.latency.StepMs({32, 0, 1, 0});
  EXPECT_NEAR(32 * 1000.0 / ms, 1044, 5);
  // Distinct (32 adapters) stays within 10% of that.
  EXPECT_GT(32 * 1000.0 / gpu.latency.StepMs({32, 0, 32, 0}), 0.9 * 1044);
  EXPECT_EQ(HardwarePreset("tpu").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FitStepLatency, RecoversCoefficientsFromExactSteps) {
  const StepLatencyModel truth{5.0, 2.0, 0.5, 0.25, 0.0};
  std::vector<MeasuredStep> steps;
  for (int d : {1, 8, 32}) {
    for (int p : {0, 100}) {
      for (int a : {1, 4}) steps.push_back({d, p, a, truth.StepMs({d, p, a, 0})});
    }
  }
  absl::StatusOr<StepLatencyModel> fit = FitStepLatency(steps, StepLatencyModel{});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->base_ms, 5.0, 1e-6);
  EXPECT_NEAR(fit->decode_ms_per_token, 2.0, 1e-6);
  EXPECT_NEAR(fit->prefill_ms_per_token, 0.5, 1e-6);
  EXPECT_NEAR(fit->ms_per_distinct_adapter, 0.25, 1e-6);
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
