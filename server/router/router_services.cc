#include "server/router/router_services.h"

#include "absl/strings/str_format.h"
#include "server/admin_service.h"
#include "server/status_mapping.h"
#include "spdlog/spdlog.h"

namespace loom {

void FillRouterStatus(const ClusterStatus& s, const std::string& base_model,
                      int kv_page_tokens, v1::GetStatusResponse* out) {
  out->set_role("router");
  out->set_base_model(base_model);
  int running = 0, queued = static_cast<int>(s.queued);
  int64_t used = 0, free = 0;
  for (const ClusterWorkerStatus& w : s.workers) {
    v1::WorkerStatus* ws = out->add_workers();
    ws->set_id(w.name);
    ws->set_backend("remote");
    ws->set_running(w.load.running);
    ws->set_queued(w.load.queued);
    ws->set_kv_pages_free(w.load.kv_pages_free);
    ws->set_kv_pages_used(int64_t{w.load.kv_pages_total} - w.load.kv_pages_free);
    ws->set_kv_page_tokens(kv_page_tokens);
    ws->set_steps(static_cast<int64_t>(w.load.steps));
    for (const std::string& a : w.load.resident_adapters) ws->add_resident_adapters(a);
    ws->set_up(w.up);
    ws->set_draining(w.draining);
    ws->set_idle(w.idle);
    ws->set_assigned(w.assigned);
    if (w.up) {
      running += w.load.running;
      queued += w.load.queued;
      used += int64_t{w.load.kv_pages_total} - w.load.kv_pages_free;
      free += w.load.kv_pages_free;
    }
  }
  out->set_running(running);
  out->set_queued(queued);
  out->set_kv_pages_used(used);
  out->set_kv_pages_free(free);
  for (const std::string& n : s.idle_workers) out->add_idle_workers(n);
  out->set_want_more_workers(s.want_more);
  out->set_migrations(s.migrations);
  out->set_failovers(s.failovers);
}

std::vector<std::string> RouterAdminService::UpWorkers() const {
  std::vector<std::string> out;
  for (const ClusterWorkerStatus& w : frontend_->GetStatus().workers) {
    if (w.up) out.push_back(w.name);
  }
  return out;
}

namespace {

std::string Authorization(grpc::CallbackServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

AdminFanout& Disabled() {
  static AdminFanout* const none = new AdminFanout(0, 0);
  return *none;
}

}  // namespace

grpc::ServerUnaryReactor* RouterAdminService::LoadAdapter(grpc::CallbackServerContext* ctx,
                                                          const v1::LoadAdapterRequest* request,
                                                          v1::LoadAdapterResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  AdminFanout& f = fanout_ != nullptr ? *fanout_ : Disabled();
  f.LoadAdapter(UpWorkers(), Authorization(ctx), *request,
                [reactor, response](absl::StatusOr<v1::LoadAdapterResponse> r) {
                  if (!r.ok()) return reactor->Finish(GrpcStatusForClient(r.status()));
                  *response = *std::move(r);
                  reactor->Finish(grpc::Status::OK);
                });
  return reactor;
}

grpc::ServerUnaryReactor* RouterAdminService::UnloadAdapter(
    grpc::CallbackServerContext* ctx, const v1::UnloadAdapterRequest* request,
    v1::UnloadAdapterResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  AdminFanout& f = fanout_ != nullptr ? *fanout_ : Disabled();
  f.UnloadAdapter(UpWorkers(), Authorization(ctx), *request,
                  [reactor, response](absl::StatusOr<v1::UnloadAdapterResponse> r) {
                    if (!r.ok()) return reactor->Finish(GrpcStatusForClient(r.status()));
                    *response = *std::move(r);
                    reactor->Finish(grpc::Status::OK);
                  });
  return reactor;
}

grpc::ServerUnaryReactor* RouterAdminService::ListAdapters(grpc::CallbackServerContext* ctx,
                                                           const v1::ListAdaptersRequest*,
                                                           v1::ListAdaptersResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  AdminFanout& f = fanout_ != nullptr ? *fanout_ : Disabled();
  f.ListAdapters(UpWorkers(), Authorization(ctx),
                 [reactor, response](absl::StatusOr<v1::ListAdaptersResponse> r) {
                   if (!r.ok()) return reactor->Finish(GrpcStatusForClient(r.status()));
                   *response = *std::move(r);
                   reactor->Finish(grpc::Status::OK);
                 });
  return reactor;
}

grpc::ServerUnaryReactor* RouterAdminService::GetStatus(grpc::CallbackServerContext* ctx,
                                                        const v1::GetStatusRequest*,
                                                        v1::GetStatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  FillRouterStatus(frontend_->GetStatus(), model_->name, kv_page_tokens_, response);
  response->set_version(kLoomVersion);
  response->set_uptime_seconds(absl::ToInt64Seconds(absl::Now() - start_));
  response->set_serving(serving_->load(std::memory_order_acquire));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* RouterAdminService::DrainWorker(grpc::CallbackServerContext* ctx,
                                                          const v1::DrainWorkerRequest* request,
                                                          v1::DrainWorkerResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!Authorized(ctx, reactor)) return reactor;
  int assigned = 0;
  for (const ClusterWorkerStatus& w : frontend_->GetStatus().workers) {
    if (w.name == request->worker()) assigned = w.assigned;
  }
  absl::Status s = frontend_->Drain(request->worker(), request->undrain());
  if (!s.ok()) {
    reactor->Finish(GrpcStatusForClient(s));
    return reactor;
  }
  spdlog::info("event={} worker={} requests={}", request->undrain() ? "undrain" : "drain",
               request->worker(), assigned);
  response->set_moving_requests(request->undrain() ? 0 : assigned);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace loom
