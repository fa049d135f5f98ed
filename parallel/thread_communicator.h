// ThreadCommunicator: the CPU implementation of Communicator for W ranks that are threads
// of one process (tests and CPU tensor parallelism). The ranks meet in a shared-memory
// rendezvous guarded by one mutex; a generation counter tells each waiter when its
// collective has completed. Every collective is two rendezvous: the first checks that all
// ranks made the same call and (AllReduceSum) lets the last rank to arrive sum the W
// buffers in rank order into a shared result; then every rank copies what it needs; the
// second keeps the shared state alive until everyone has copied.
//
// Bitwise deterministic: the sum is computed by one thread in rank order whatever the
// arrival order, and every rank copies the same result.
#ifndef LOOM_PARALLEL_THREAD_COMMUNICATOR_H_
#define LOOM_PARALLEL_THREAD_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/communicator.h"

namespace loom {

struct ThreadCommunicatorOptions {
  // How long a rank waits in one rendezvous for the others before the whole group fails
  // with DeadlineExceeded (naming the missing ranks). Bounds the cost of a rank that died.
  absl::Duration timeout = absl::Minutes(1);
};

// W endpoints of one group; endpoint r has rank() == r. Each endpoint is used by one
// thread at a time; the endpoints may be destroyed in any order.
// InvalidArgument unless 1 <= world_size <= 1024.
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> CreateThreadCommunicators(
    int world_size, const ThreadCommunicatorOptions& options = {});

}  // namespace loom

#endif  // LOOM_PARALLEL_THREAD_COMMUNICATOR_H_
