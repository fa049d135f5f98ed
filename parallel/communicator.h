// Collective communication between the ranks of one tensor-parallel group (Megatron-style
// TP: every rank runs the same sequence of collectives on its own shard).
//
// Contract shared by every implementation:
// * Each rank owns one Communicator endpoint and calls it from one thread at a time. All
//   ranks call the same collectives, in the same order, with the same sizes (and root).
// * Deterministic reduction: AllReduceSum gives every rank bitwise the same result, summed
//   in rank order ((buf_0 + buf_1) + buf_2) + ... + buf_{W-1}, element by element, so TP
//   results are reproducible run to run and identical on every rank.
// * Failure is a Status, never a hang or an abort: a collective whose peers disagree on
//   the call (op, size, root), time out, or have aborted returns an error on every rank
//   that reaches it, and the communicator stays failed (every later call returns the same
//   error) — like a NCCL communicator after ncclCommAbort.
// * Buffers are host memory for the CPU implementation and device memory for NCCL.
#ifndef LOOM_PARALLEL_COMMUNICATOR_H_
#define LOOM_PARALLEL_COMMUNICATOR_H_

#include <cstddef>

#include "absl/status/status.h"

namespace loom {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // buf [n] <- sum over ranks of buf [n] (rank order; see above). In place.
  virtual absl::Status AllReduceSum(float* buf, size_t n) = 0;

  // out [world_size][n_per_rank] <- every rank's in [n_per_rank], rank r's at row r.
  // in may be out + rank() * n_per_rank (in-place gather); otherwise they must not overlap.
  virtual absl::Status AllGather(const float* in, size_t n_per_rank, float* out) = 0;

  // buf [n] <- root's buf [n] on every rank. REQUIRES: 0 <= root < world_size().
  virtual absl::Status Broadcast(float* buf, size_t n, int root) = 0;

  // Returns once every rank has entered Barrier.
  virtual absl::Status Barrier() = 0;

  // Fails the whole group with `reason`: ranks blocked in (or later entering) a collective
  // return it instead of waiting for this rank. For a rank that hit an error outside the
  // collectives (e.g. its forward pass failed) so that its peers do not wait forever.
  virtual void Abort(const absl::Status& reason) = 0;
};

}  // namespace loom

#endif  // LOOM_PARALLEL_COMMUNICATOR_H_
