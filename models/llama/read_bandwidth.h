// A memory read-bandwidth probe for benchmarks: the denominator of "fraction of the
// bandwidth bound" figures. Streams a buffer with vector loads and several accumulators
// (a scalar-accumulator loop reaches only about half the bandwidth on these machines).
#ifndef LOOM_MODELS_LLAMA_READ_BANDWIDTH_H_
#define LOOM_MODELS_LLAMA_READ_BANDWIDTH_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace loom {

// Read bandwidth in bytes/s: best of `passes` passes of `threads` threads each streaming
// an equal share of a `bytes` buffer (AVX2 loads where the CPU has them). The buffer is
// checksummed so the reads cannot be optimised away.
absl::StatusOr<double> MeasureReadBandwidth(size_t bytes, int threads, int passes);

}  // namespace loom

#endif  // LOOM_MODELS_LLAMA_READ_BANDWIDTH_H_
