// ReferenceBackend: single-threaded, plain scalar, obviously-correct implementation of
// every Backend method (double accumulation, see reference_kernels.h). It is the oracle
// for the optimised backends' tests; it is slow and not meant for serving.
#ifndef LOOM_KERNELS_CPU_REFERENCE_BACKEND_H_
#define LOOM_KERNELS_CPU_REFERENCE_BACKEND_H_

#include <memory>

#include "kernels/backend.h"

namespace loom::kernels {

std::unique_ptr<Backend> CreateReferenceBackend();

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_CPU_REFERENCE_BACKEND_H_
