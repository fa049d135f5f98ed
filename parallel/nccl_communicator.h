// NcclCommunicator: Communicator over NCCL for ranks on different GPUs (one rank per GPU,
// in one process with one thread per rank, or one process per rank). Buffers are DEVICE
// pointers on the rank's GPU. Built only with --config=cuda (links libnccl from the CUDA
// toolkit, /usr/local/cuda/lib).
//
// * Deterministic AllReduceSum (ReduceOrder::kRankOrder, the default): ncclAllGather into a
//   [W, n] device scratch, then one kernel sums the rows in rank order, so every rank gets
//   bitwise the same ((b0 + b1) + ...) result as ThreadCommunicator. It moves (W-1)·n
//   floats per rank instead of the ring's 2(W-1)/W·n; kNcclNative uses ncclAllReduce
//   (NCCL's own order: identical on all ranks for ring/tree in practice, but not rank
//   order and not guaranteed across NCCL versions or topologies).
// * Synchronous: each call queues on the communicator's stream and returns after the
//   stream finished it; while waiting it polls ncclCommGetAsyncError, and after `timeout`
//   it aborts the communicator (ncclCommAbort) and returns DeadlineExceeded. After any
//   error the communicator stays failed.
// * NCCL refuses two ranks of one communicator on the same GPU: W ranks need W GPUs.
#ifndef LOOM_PARALLEL_NCCL_COMMUNICATOR_H_
#define LOOM_PARALLEL_NCCL_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/communicator.h"

namespace loom {

// ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES); made by rank 0 and sent to every rank out
// of band (in one process: copied).
struct NcclUniqueId {
  char bytes[128];
};

absl::StatusOr<NcclUniqueId> NcclGetUniqueId();

struct NcclCommunicatorOptions {
  enum class ReduceOrder { kRankOrder, kNcclNative };
  ReduceOrder reduce_order = ReduceOrder::kRankOrder;
  absl::Duration timeout = absl::Minutes(1);
};

class NcclCommunicator : public Communicator {
 public:
  // Joins rank `rank` of `world_size` on CUDA device `device` (ncclCommInitRank: blocks
  // until all ranks have joined; call it from each rank's thread or process).
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      const NcclUniqueId& id, int rank, int world_size, int device,
      const NcclCommunicatorOptions& options = {});

  // One process driving `devices.size()` GPUs (ncclCommInitAll); endpoint r on devices[r].
  static absl::StatusOr<std::vector<std::unique_ptr<NcclCommunicator>>> CreateAll(
      const std::vector<int>& devices, const NcclCommunicatorOptions& options = {});

  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int device() const { return device_; }

  absl::Status AllReduceSum(float* buf, size_t n) override;
  absl::Status AllGather(const float* in, size_t n_per_rank, float* out) override;
  absl::Status Broadcast(float* buf, size_t n, int root) override;
  absl::Status Barrier() override;
  // From the rank's own thread: aborts this endpoint (ncclCommAbort). Peers in other
  // processes see a remote error or their timeout, not this reason.
  void Abort(const absl::Status& reason) override;

 private:
  struct Impl;
  explicit NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int world_size, int device);

  std::unique_ptr<Impl> impl_;
  const int rank_;
  const int world_size_;
  const int device_;
};

}  // namespace loom

#endif  // LOOM_PARALLEL_NCCL_COMMUNICATOR_H_
