// absl::Status <-> grpc::Status at the service edge. The canonical codes are the same
// numbers in both (absl/status/status.h documents the 1:1 correspondence), so the mapping
// keeps the code and the message unchanged.
#ifndef LOOM_SERVER_STATUS_MAPPING_H_
#define LOOM_SERVER_STATUS_MAPPING_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace loom {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(s.code())),
                      std::string(s.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(static_cast<int>(s.error_code())),
                      s.error_message());
}

}  // namespace loom

#endif  // LOOM_SERVER_STATUS_MAPPING_H_
