// loom.v1.Inference over the gRPC callback API, for --role=single and --role=router
// alike: everything goes through the InferenceEdge (validation, limits, the Frontend,
// the model catalog). Generate and Tokenize are registered raw (grpc::ByteBuffer) so the
// edge parses the request itself and answers a malformed one (e.g. a string field that
// is not UTF-8) with INVALID_ARGUMENT naming the field (grpc_message_codec.h).
#ifndef LOOM_SERVER_INFERENCE_SERVICE_H_
#define LOOM_SERVER_INFERENCE_SERVICE_H_

#include "grpcpp/grpcpp.h"
#include "proto/loom/v1/inference.grpc.pb.h"
#include "server/inference_edge.h"

namespace loom {

using InferenceServiceBase = v1::Inference::WithRawCallbackMethod_Generate<
    v1::Inference::WithRawCallbackMethod_Tokenize<
        v1::Inference::WithCallbackMethod_ListModels<v1::Inference::Service>>>;

class InferenceService final : public InferenceServiceBase {
 public:
  // `edge` must outlive the service.
  explicit InferenceService(const InferenceEdge* edge) : edge_(edge) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

 private:
  const InferenceEdge* const edge_;
};

}  // namespace loom

#endif  // LOOM_SERVER_INFERENCE_SERVICE_H_
