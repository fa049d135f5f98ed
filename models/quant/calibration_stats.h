// Calibration statistics of the quantized activations: per layer and activation, the
// channel energies diag(X^T X) (sum over tokens of x_j^2) and, for GPTQ, the whole
// X^T X. Gathered by CalibrationTap from LlamaModel's ActivationTap hook.
#ifndef LOOM_MODELS_QUANT_CALIBRATION_STATS_H_
#define LOOM_MODELS_QUANT_CALIBRATION_STATS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "models/llama/llama_model.h"
#include "models/quant/quant_names.h"

namespace loom::quant {

struct ActivationStats {
  int k = 0;
  std::vector<double> energy;   // [k] sum_t x[t, j]^2, original channel order
  std::vector<double> hessian;  // [k, k] sum_t x[t] x[t]^T; empty unless collected
};

struct CalibrationStats {
  int64_t tokens = 0;        // tokens observed (per activation)
  bool has_hessian = false;
  std::vector<std::array<ActivationStats, kNumQuantActivations>> layers;  // by QuantActivation
};

QuantActivation ActivationOf(TapPoint p);

// Accumulates CalibrationStats over Forward calls. Not thread-safe (Forward's thread).
class CalibrationTap final : public ActivationTap {
 public:
  // widths: channels per activation (ActivationWidths). With `hessian`, X^T X is summed
  // too; `backend` (nullable, not owned) then computes it with its F32 MatMul, else a
  // plain loop does.
  CalibrationTap(int n_layers, const std::array<int, kNumQuantActivations>& widths,
                 bool hessian, kernels::Backend* backend);

  void Observe(int layer, TapPoint point, const float* x, int n, int k) override;

  // The first inconsistency seen (layer out of range, width mismatch), or OK.
  const absl::Status& status() const { return status_; }

  // The statistics so far. Hessians are rounded through float, as the cache stores them,
  // so a cached rerun quantizes identically.
  CalibrationStats Take();

 private:
  void AddHessian(const float* x, int n, int k, double* h);

  CalibrationStats stats_;
  kernels::Backend* backend_;
  absl::Status status_;
  std::vector<float> xt_, prod_;
  kernels::ActivationPack pack_;
};

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_CALIBRATION_STATS_H_
