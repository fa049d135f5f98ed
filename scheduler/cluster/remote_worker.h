// RemoteWorker: the Worker interface (worker.h) over gRPC, as a client of a
// `loomd --role=worker` serving loom.internal.v1.Worker.
//
// Streams: Start opens one Generate call (gRPC callback API: a ClientReadReactor per
// call, no thread per stream); Cancel cancels the call's context. Events are delivered on
// gRPC's callback threads, or on the heartbeat thread when the worker is declared lost.
// The finished event: the worker's last message (finished = true) with OK status; else
// the call's status, where a drop the router did not ask for (connection lost, the
// worker's server shut down: UNAVAILABLE, or CANCELLED without our Cancel) or a stream
// that ends without a finished message becomes kUnavailable, so the frontend re-places it.
//
// Heartbeats: a thread calls Heartbeat every heartbeat_interval (each call's deadline is
// connect_timeout). Load() is the latest report; it is Unavailable until the first report
// and after missed_heartbeats consecutive failures ("lost"), and then every open stream
// at once finishes with kUnavailable (its call is cancelled) and Start fails Unavailable.
// A later successful heartbeat makes the worker usable again (new streams only).
//
// Threads: every public method from any thread; callbacks run under no lock of this class
// except the stream's own delivery lock, so a callback may call Start, Cancel or Load.
#ifndef LOOM_SCHEDULER_CLUSTER_REMOTE_WORKER_H_
#define LOOM_SCHEDULER_CLUSTER_REMOTE_WORKER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/loom/internal/v1/worker.grpc.pb.h"
#include "scheduler/worker/worker.h"

namespace loom {

struct RemoteWorkerOptions {
  std::string target;                                      // "host:port"
  absl::Duration heartbeat_interval = absl::Milliseconds(200);
  int missed_heartbeats = 3;          // consecutive failures before the worker is lost
  absl::Duration connect_timeout = absl::Seconds(1);  // deadline of each heartbeat call,
                                                      // connecting included
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null = insecure
};

class RemoteWorker final : public Worker {
 public:
  // Creates the channel and starts heartbeating; does not wait for the worker (see
  // WaitUntilReady). InvalidArgument for an empty target, a non-positive interval or
  // timeout, or missed_heartbeats < 1.
  static absl::StatusOr<std::unique_ptr<RemoteWorker>> Create(RemoteWorkerOptions options);
  // Stops heartbeating, cancels every open stream (each gets its finished event) and
  // waits until gRPC is done with them.
  ~RemoteWorker() override;

  const std::string& name() const override { return options_.target; }

  // Errors: Unavailable (no heartbeat yet, or lost).
  // Errors the worker finds (NotFound adapter, context too long, ...) arrive as the
  // finished event's error.
  absl::StatusOr<uint64_t> Start(WorkerRequest request, WorkerCallback callback) override;
  void Cancel(uint64_t handle) override;
  absl::StatusOr<WorkerLoad> Load() override;

  // Blocks until a heartbeat has succeeded (OK) or `timeout` passes (DeadlineExceeded,
  // with the last heartbeat error).
  absl::Status WaitUntilReady(absl::Duration timeout);

 private:
  class Stream;

  explicit RemoteWorker(RemoteWorkerOptions options);
  void HeartbeatLoop();
  // Every open stream finishes with kUnavailable `why`.
  void FailAllStreams(const std::string& why);
  void Remove(uint64_t handle);

  const RemoteWorkerOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<internal::v1::Worker::Stub> stub_;

  absl::Mutex mu_;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;  // a heartbeat succeeded and none lost since
  int misses_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_) =
      absl::UnavailableError("no heartbeat yet");
  WorkerLoad load_ ABSL_GUARDED_BY(mu_);

  std::thread heartbeat_;
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_CLUSTER_REMOTE_WORKER_H_
