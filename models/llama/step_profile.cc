#include "models/llama/step_profile.h"

#include "absl/strings/str_format.h"

namespace loom {

const char* StepOpName(StepOp op) {
  switch (op) {
    case StepOp::kEmbed: return "embed";
    case StepOp::kNorm: return "norm(+quantize)";
    case StepOp::kQkv: return "q/k/v linear";
    case StepOp::kRope: return "rope";
    case StepOp::kKvAppend: return "kv append";
    case StepOp::kAttention: return "attention";
    case StepOp::kOQuant: return "attn-out quantize";
    case StepOp::kO: return "o linear";
    case StepOp::kGateUp: return "gate/up linear";
    case StepOp::kSiluMul: return "silu*mul(+quantize)";
    case StepOp::kDown: return "down linear";
    case StepOp::kLora: return "lora";
    case StepOp::kResidual: return "residual";
    case StepOp::kHead: return "output head";
    case StepOp::kRotate: return "residual rotation";
    case StepOp::kSample: return "sampling";
    case StepOp::kCount: break;
  }
  return "?";
}

int64_t StepProfile::total_ns() const {
  int64_t t = 0;
  for (int64_t v : ns) t += v;
  return t;
}

std::string StepProfile::Table() const {
  std::string out;
  const double total = static_cast<double>(total_ns());
  const double per = steps > 0 ? 1e-6 / static_cast<double>(steps) : 0.0;
  for (int i = 0; i < static_cast<int>(StepOp::kCount); ++i) {
    if (ns[i] == 0) continue;
    absl::StrAppendFormat(&out, "  %-20s %8.2f ms/step %5.1f%%\n",
                          StepOpName(static_cast<StepOp>(i)), ns[i] * per,
                          total > 0 ? 100.0 * ns[i] / total : 0.0);
  }
  absl::StrAppendFormat(&out, "  %-20s %8.2f ms/step (%d steps)\n", "total", total * per,
                        steps);
  return out;
}

}  // namespace loom
