// WorkerService: loom.internal.v1.Worker (proto/loom/internal/v1/worker.proto) over a
// Worker, in practice the engine of `loomd --role=worker`.
//
// Generate: one streaming reactor per call. Threads: gRPC callback threads (OnWriteDone,
// OnCancel, OnDone) and the worker's event thread meet in a shared State guarded by its
// mutex; the State outlives the reactor (the worker's callback keeps it). Backpressure as
// in server/generate_reactor.h: one write in flight, later events queued. A finished event
// without error becomes the last message (finished = true) and status OK; one with an
// error ends the call with that status (its tokens, if any, sent first). The call's
// cancellation cancels the request on the worker; its deadline becomes the request's.
// Heartbeat: the worker's Load(); while not serving (draining) still answered, with
// draining set, so that the router lets running streams finish instead of failing them
// over. Generate fails UNAVAILABLE while not serving.
#ifndef LOOM_SERVER_WORKER_WORKER_SERVICE_H_
#define LOOM_SERVER_WORKER_WORKER_SERVICE_H_

#include <atomic>

#include "grpcpp/grpcpp.h"
#include "proto/loom/internal/v1/worker.grpc.pb.h"
#include "scheduler/worker/worker.h"
#include "server/metrics/server_metrics.h"

namespace loom {

class WorkerService final : public internal::v1::Worker::CallbackService {
 public:
  // `worker`, `serving` and `metrics` (may be null) must outlive the server. While
  // `serving` is false Generate fails UNAVAILABLE and Heartbeat reports draining.
  WorkerService(Worker* worker, const std::atomic<bool>* serving, ServerMetrics* metrics)
      : worker_(worker), serving_(serving), metrics_(metrics) {}

  grpc::ServerWriteReactor<internal::v1::WorkerGenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx,
      const internal::v1::WorkerGenerateRequest* request) override;

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const internal::v1::HeartbeatRequest* request,
                                      internal::v1::WorkerLoadReport* report) override;

 private:
  Worker* const worker_;
  const std::atomic<bool>* const serving_;
  ServerMetrics* const metrics_;
};

}  // namespace loom

#endif  // LOOM_SERVER_WORKER_WORKER_SERVICE_H_
