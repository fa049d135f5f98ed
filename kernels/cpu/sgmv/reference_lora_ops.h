// ReferenceLoraOps: the plain scalar LoraOps (kernels/lora_ops.h), for tests. Every dot
// is accumulated in double and rounded once to float; expand adds
// float(scale * dot) to y in float. Single-threaded, obviously correct, slow.
#ifndef LOOM_KERNELS_CPU_SGMV_REFERENCE_LORA_OPS_H_
#define LOOM_KERNELS_CPU_SGMV_REFERENCE_LORA_OPS_H_

#include <memory>

#include "kernels/lora_ops.h"

namespace loom::kernels {

std::unique_ptr<LoraOps> CreateReferenceLoraOps();

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_CPU_SGMV_REFERENCE_LORA_OPS_H_
