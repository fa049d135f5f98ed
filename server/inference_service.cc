#include "server/inference_service.h"

#include "server/generate_reactor.h"
#include "server/grpc_inference_messages.h"
#include "server/grpc_message_codec.h"
#include "server/status_mapping.h"

namespace loom {

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Generate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) {
  return new GenerateReactor(edge_, ctx, request);
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  v1::TokenizeRequest req;
  absl::Status parsed = edge_->Authenticate(Authorization(*ctx));
  if (parsed.ok()) parsed = ParseRequest(*request, &req);
  absl::StatusOr<std::vector<int32_t>> ids =
      parsed.ok() ? RenderPrompt(PromptOf(req), edge_->model(), edge_->limits())
                  : absl::StatusOr<std::vector<int32_t>>(parsed);
  if (!ids.ok()) {
    reactor->Finish(GrpcStatusForClient(ids.status()));
    return reactor;
  }
  v1::TokenizeResponse out;
  for (int32_t id : *ids) {
    out.add_token_ids(id);
    if (req.return_pieces()) {
      absl::StatusOr<std::string_view> bytes = edge_->model().tokenizer->TokenBytes(id);
      out.add_pieces(bytes.ok() ? std::string(*bytes) : std::string());
    }
  }
  *response = SerializeResponse(out);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ListModels(grpc::CallbackServerContext* ctx,
                                                       const v1::ListModelsRequest*,
                                                       v1::ListModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status s = edge_->Authenticate(Authorization(*ctx)); !s.ok()) {
    reactor->Finish(GrpcStatusForClient(s));
    return reactor;
  }
  for (const ModelCard& card : edge_->catalog().List()) {
    v1::ModelInfo* m = response->add_models();
    m->set_id(card.id);
    m->set_kind(card.parent.empty() ? v1::ModelInfo::KIND_BASE : v1::ModelInfo::KIND_ADAPTER);
    m->set_base_model(card.parent);
    m->set_max_context(card.max_context);
    m->set_rank(card.rank);
    m->set_ready(card.ready);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace loom
