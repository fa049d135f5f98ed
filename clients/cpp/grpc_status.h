// absl::Status <-> grpc::Status, 1:1 by code (both use the canonical google.rpc codes
// 0..16), message kept. Codes outside that range map to UNKNOWN. Used by the client
// library and usable at the server's service edge.
#ifndef LOOM_CLIENTS_CPP_GRPC_STATUS_H_
#define LOOM_CLIENTS_CPP_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace loom {

absl::Status FromGrpcStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace loom

#endif  // LOOM_CLIENTS_CPP_GRPC_STATUS_H_
