#include "server/admin_service.h"

#include <string>

#include "kernels/kv_quant.h"
#include "server/status_mapping.h"
#include "spdlog/spdlog.h"

namespace loom {
namespace {

v1::AdapterState ToProto(AdapterState s) {
  switch (s) {
    case AdapterState::kLoading: return v1::ADAPTER_STATE_LOADING;
    case AdapterState::kReady: return v1::ADAPTER_STATE_READY;
    case AdapterState::kUnloading: return v1::ADAPTER_STATE_UNLOADING;
    case AdapterState::kFailed: return v1::ADAPTER_STATE_FAILED;
  }
  return v1::ADAPTER_STATE_UNSPECIFIED;
}

}  // namespace

v1::AdapterInfo ToProto(const AdapterInfo& a) {
  v1::AdapterInfo out;
  out.set_id(a.id);
  out.set_source(a.source);
  out.set_state(ToProto(a.state));
  out.set_error(a.error);
  out.set_rank(a.rank);
  for (LoraTarget t : a.targets) out.add_targets(PeftModuleName(t));
  out.set_bytes(a.bytes);
  out.set_pinned(a.pinned);
  out.set_resident(a.resident);
  out.set_active_requests(a.active_leases);
  out.set_requests_served(a.requests_served);
  if (a.last_use != absl::InfinitePast()) {
    const int64_t nanos = absl::ToUnixNanos(a.last_use);
    out.mutable_last_use()->set_seconds(nanos / 1000000000);
    out.mutable_last_use()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  }
  return out;
}

bool AuthorizeAdminCall(const BearerAuth& auth, grpc::CallbackServerContext* ctx,
                        grpc::ServerUnaryReactor* reactor) {
  if (!auth.required()) return true;
  std::string_view header;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) header = std::string_view(it->second.data(), it->second.size());
  absl::Status s = auth.Check(header);
  if (s.ok()) return true;
  spdlog::warn("event=admin_unauthenticated peer={}", ctx->peer());
  reactor->Finish(GrpcStatusForClient(s));
  return false;
}

grpc::ServerUnaryReactor* AdminService::LoadAdapter(grpc::CallbackServerContext* ctx,
                                                    const v1::LoadAdapterRequest* request,
                                                    v1::LoadAdapterResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  adapters_->LoadAsync(request->id(), request->source(), request->pin(),
                       [reactor, response](absl::StatusOr<AdapterInfo> info) {
                         if (!info.ok()) return reactor->Finish(GrpcStatusForClient(info.status()));
                         *response->mutable_adapter() = ToProto(*info);
                         reactor->Finish(grpc::Status::OK);
                       });
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::UnloadAdapter(grpc::CallbackServerContext* ctx,
                                                      const v1::UnloadAdapterRequest* request,
                                                      v1::UnloadAdapterResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  absl::StatusOr<int> draining = adapters_->Unload(request->id());
  if (!draining.ok()) {
    reactor->Finish(GrpcStatusForClient(draining.status()));
  } else {
    response->set_draining_requests(*draining);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::ListAdapters(grpc::CallbackServerContext* ctx,
                                                     const v1::ListAdaptersRequest* request,
                                                     v1::ListAdaptersResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  for (const AdapterInfo& a : adapters_->store()->List()) *response->add_adapters() = ToProto(a);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::GetStatus(grpc::CallbackServerContext* ctx,
                                                  const v1::GetStatusRequest* request,
                                                  v1::GetStatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  const EngineStats st = engine_->GetStats();
  const std::vector<AdapterInfo> adapters = adapters_->store()->List();
  response->set_version(kLoomVersion);
  response->set_base_model(model_->name);
  response->set_uptime_seconds(absl::ToInt64Seconds(absl::Now() - start_));
  response->set_serving(serving_->load(std::memory_order_acquire));
  v1::WorkerStatus* w = response->add_workers();
  w->set_id("cpu-0");
  w->set_backend("cpu");
  w->set_running(st.running);
  w->set_queued(st.waiting);
  w->set_kv_pages_used(st.kv_pages_used);
  w->set_kv_pages_free(st.kv_pages_total - st.kv_pages_used);
  w->set_kv_page_tokens(kv_page_tokens_);
  w->set_kv_cache_dtype(std::string(kernels::KvDtypeName(st.kv_dtype)));
  w->set_preemptions(st.preemptions);
  w->set_steps(st.steps);
  w->set_last_batch_tokens(st.last_batch_tokens);
  w->set_last_batch_sequences(st.last_batch_sequences);
  int resident = 0;
  for (const AdapterInfo& a : adapters) {
    if (a.active_leases > 0) w->add_resident_adapters(a.id);
    if (a.resident) ++resident;
  }
  response->set_running(st.running);
  response->set_queued(st.waiting);
  response->set_kv_pages_used(st.kv_pages_used);
  response->set_kv_pages_free(st.kv_pages_total - st.kv_pages_used);
  response->set_adapters_registered(static_cast<int32_t>(adapters.size()));
  response->set_adapters_resident(resident);
  response->set_adapter_bytes_resident(adapters_->store()->resident_bytes());
  response->set_adapter_bytes_budget(adapters_->store()->budget_bytes());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::DrainWorker(grpc::CallbackServerContext* ctx,
                                                    const v1::DrainWorkerRequest*,
                                                    v1::DrainWorkerResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                               "DrainWorker moves requests between the workers of a router "
                               "(loomd --role=router); this loomd serves one engine"));
  return reactor;
}

}  // namespace loom
