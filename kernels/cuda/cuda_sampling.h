// Token sampling on a CUDA device: temperature / top-k / top-p / min-p (the semantics of
// models/sampling/sampler.h minus the penalties, which stay on the host), one token per
// logits row, no host round trip for the logits. Public header: no CUDA headers.
//
// The caller supplies each row's uniform draw u (so a seeded request draws from its own
// generator exactly as the CPU Sampler does: u = (mt19937_64() >> 11) * 2^-53). Sums and
// expf run in FP32 on the device, so a draw within ~1e-6 of a cumulative boundary may pick
// the neighbouring token of the CPU's choice; greedy rows are exact.
#ifndef LOOM_KERNELS_CUDA_CUDA_SAMPLING_H_
#define LOOM_KERNELS_CUDA_CUDA_SAMPLING_H_

#include <cstdint>

#include "absl/status/status.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace loom::kernels::cuda {

struct RowSampling {
  float temperature = 0.0f;  // [0, 100]; 0 = greedy (argmax, ties -> lowest id)
  int top_k = 0;             // >= 0; 0 = off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  double u = 0.0;            // [0, 1)
};

// ids[r] (device int32 [n]) = token sampled from logits (device FP32 [n, vocab]) row r
// with params[r] (DEVICE array of n RowSampling: build it on the host, copy once per step).
// InvalidArgument for n < 0 or vocab < 1 or null pointers; parameters are not validated
// on the device (validate them on the host with RowSamplingValid).
absl::Status SampleTokens(const float* logits, int n, int vocab, const RowSampling* params,
                          int32_t* ids, CUstream_st* stream = nullptr);

// OK, or InvalidArgument naming the bad field (host-side check of one row's parameters).
absl::Status RowSamplingValid(const RowSampling& p);

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_CUDA_SAMPLING_H_
