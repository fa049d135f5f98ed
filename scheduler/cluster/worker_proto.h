// Conversions between the Worker interface's types (worker.h) and loom.internal.v1
// messages (proto/loom/internal/v1/worker.proto), shared by the Worker gRPC service
// (server/worker) and its client (RemoteWorker). Deadlines are not part of the messages:
// they travel as the gRPC call's deadline.
#ifndef LOOM_SCHEDULER_CLUSTER_WORKER_PROTO_H_
#define LOOM_SCHEDULER_CLUSTER_WORKER_PROTO_H_

#include "proto/loom/internal/v1/worker.pb.h"
#include "scheduler/worker/worker.h"

namespace loom {

// Field by field; request.deadline is dropped (use the call's deadline).
internal::v1::WorkerGenerateRequest ToProto(const WorkerRequest& request);
// Field by field; deadline left infinite. Values are checked by Worker::Start.
WorkerRequest FromProto(const internal::v1::WorkerGenerateRequest& request);

// A non-error event: tokens, logprobs, finished and end_of_generation. An event with an
// error is never sent as a message (the call's status carries it).
internal::v1::WorkerGenerateResponse ToProto(const WorkerEvent& event);
// InvalidArgument when logprobs / top_logprobs are present but not one per token, or an
// alternatives entry has mismatched lengths (a message from a broken peer).
absl::StatusOr<WorkerEvent> FromProto(const internal::v1::WorkerGenerateResponse& response);

internal::v1::WorkerLoadReport ToProto(const WorkerLoad& load);
WorkerLoad FromProto(const internal::v1::WorkerLoadReport& report);

}  // namespace loom

#endif  // LOOM_SCHEDULER_CLUSTER_WORKER_PROTO_H_
