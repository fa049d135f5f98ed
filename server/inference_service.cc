#include "server/inference_service.h"

#include "server/generate_reactor.h"
#include "server/request_conversion.h"
#include "server/status_mapping.h"

namespace loom {

grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Generate(
    grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) {
  return new GenerateReactor({model_, engine_, adapters_, metrics_, serving_}, ctx, request);
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* ctx,
                                                     const v1::TokenizeRequest* request,
                                                     v1::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<std::vector<int32_t>> ids;
  switch (request->input_case()) {
    case v1::TokenizeRequest::kText:
      ids = TokenizeText(*model_, request->text());
      break;
    case v1::TokenizeRequest::kChat:
      ids = TokenizeChat(*model_, request->chat());
      break;
    default:
      ids = absl::InvalidArgumentError("input: exactly one of text or chat must be set");
  }
  if (!ids.ok()) {
    reactor->Finish(ToGrpcStatus(ids.status()));
    return reactor;
  }
  for (int32_t id : *ids) {
    response->add_token_ids(id);
    if (request->return_pieces()) {
      absl::StatusOr<std::string_view> bytes = model_->tokenizer->TokenBytes(id);
      response->add_pieces(bytes.ok() ? std::string(*bytes) : std::string());
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ListModels(grpc::CallbackServerContext* ctx,
                                                       const v1::ListModelsRequest* request,
                                                       v1::ListModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const int max_context = engine_->max_context();
  v1::ModelInfo* base = response->add_models();
  base->set_id(model_->name);
  base->set_kind(v1::ModelInfo::KIND_BASE);
  base->set_max_context(max_context);
  base->set_ready(true);
  for (const AdapterInfo& a : adapters_->store()->List()) {
    if (a.state == AdapterState::kUnloading) continue;
    v1::ModelInfo* m = response->add_models();
    m->set_id(a.id);
    m->set_kind(v1::ModelInfo::KIND_ADAPTER);
    m->set_base_model(model_->name);
    m->set_max_context(max_context);
    m->set_rank(a.rank);
    m->set_ready(a.state == AdapterState::kReady);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace loom
