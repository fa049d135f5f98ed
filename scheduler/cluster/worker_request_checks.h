// The checks every Worker applies to a WorkerRequest before anything else, so that the
// in-process and remote workers reject the same requests with the same messages. The
// engine adds its own (token ids in the vocabulary, context length, sampling values).
#ifndef LOOM_SCHEDULER_CLUSTER_WORKER_REQUEST_CHECKS_H_
#define LOOM_SCHEDULER_CLUSTER_WORKER_REQUEST_CHECKS_H_

#include "absl/status/status.h"
#include "scheduler/cluster/worker.h"

namespace loom {

// InvalidArgument naming the field: empty context, max_new_tokens < 1, generated_before
// outside [0, context size), top_logprobs outside [0, 20].
absl::Status CheckWorkerRequest(const WorkerRequest& request);

}  // namespace loom

#endif  // LOOM_SCHEDULER_CLUSTER_WORKER_REQUEST_CHECKS_H_
