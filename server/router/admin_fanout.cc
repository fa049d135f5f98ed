#include "server/router/admin_fanout.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "server/router/worker_addresses.h"

namespace loom {

absl::StatusOr<std::string> AdminFanout::AdminTarget(const std::string& worker_name) const {
  const size_t colon = worker_name.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(worker_name).substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("worker name '%s' has no port", worker_name));
  }
  std::string host = worker_name.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return JoinHostPort(host, fixed_port_ > 0 ? fixed_port_ : port + port_offset_);
}

v1::Admin::Stub* AdminFanout::Stub(const std::string& target) {
  absl::MutexLock l(&mu_);
  std::unique_ptr<v1::Admin::Stub>& s = stubs_[target];
  if (s == nullptr) {
    s = v1::Admin::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  }
  return s.get();
}

template <typename Req, typename Resp>
struct AdminFanout::Batch {
  struct Call {
    std::string worker;
    grpc::ClientContext ctx;
    Resp response;
    grpc::Status status;
  };
  Req request;
  std::vector<std::unique_ptr<Call>> calls;
  std::atomic<int> pending{0};
};

template <typename Req, typename Resp, typename Method, typename Merge>
void AdminFanout::Run(const std::vector<std::string>& workers, const std::string& authorization,
                      const Req& request, Method method, Merge merge,
                      std::function<void(absl::StatusOr<Resp>)> done) {
  if (!enabled()) {
    return done(absl::UnimplementedError(
        "adapters are managed on the workers: start the router with --worker_admin_port "
        "(or --worker_admin_port_offset) to forward adapter calls, or let workers load "
        "adapters on demand from their --adapter_roots"));
  }
  if (workers.empty()) return done(absl::UnavailableError("no worker is up"));
  auto batch = std::make_shared<Batch<Req, Resp>>();
  batch->request = request;
  for (const std::string& w : workers) {
    absl::StatusOr<std::string> target = AdminTarget(w);
    if (!target.ok()) return done(target.status());
    auto call = std::make_unique<typename Batch<Req, Resp>::Call>();
    call->worker = w;
    call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
    if (!authorization.empty()) call->ctx.AddMetadata("authorization", authorization);
    batch->calls.push_back(std::move(call));
  }
  batch->pending = static_cast<int>(batch->calls.size());
  auto finish_one = [batch, merge, done]() {
    if (batch->pending.fetch_sub(1) != 1) return;
    std::vector<std::pair<std::string, Resp>> ok;
    for (auto& c : batch->calls) {
      if (!c->status.ok()) {
        return done(absl::Status(static_cast<absl::StatusCode>(c->status.error_code()),
                                 absl::StrCat("worker ", c->worker, ": ",
                                              c->status.error_message())));
      }
      ok.emplace_back(c->worker, std::move(c->response));
    }
    done(merge(std::move(ok)));
  };
  for (auto& c : batch->calls) {
    auto* call = c.get();
    v1::Admin::Stub* stub = Stub(*AdminTarget(call->worker));
    method(stub, &call->ctx, &batch->request, &call->response,
           [call, finish_one](grpc::Status s) {
             call->status = std::move(s);
             finish_one();
           });
  }
}

void AdminFanout::LoadAdapter(const std::vector<std::string>& workers,
                              const std::string& authorization,
                              const v1::LoadAdapterRequest& request,
                              std::function<void(absl::StatusOr<v1::LoadAdapterResponse>)> done) {
  Run<v1::LoadAdapterRequest, v1::LoadAdapterResponse>(
      workers, authorization, request,
      [](v1::Admin::Stub* stub, grpc::ClientContext* ctx, const v1::LoadAdapterRequest* req,
         v1::LoadAdapterResponse* resp, std::function<void(grpc::Status)> cb) {
        stub->async()->LoadAdapter(ctx, req, resp, std::move(cb));
      },
      [](std::vector<std::pair<std::string, v1::LoadAdapterResponse>> ok) {
        return std::move(ok.front().second);
      },
      std::move(done));
}

void AdminFanout::UnloadAdapter(
    const std::vector<std::string>& workers, const std::string& authorization,
    const v1::UnloadAdapterRequest& request,
    std::function<void(absl::StatusOr<v1::UnloadAdapterResponse>)> done) {
  Run<v1::UnloadAdapterRequest, v1::UnloadAdapterResponse>(
      workers, authorization, request,
      [](v1::Admin::Stub* stub, grpc::ClientContext* ctx, const v1::UnloadAdapterRequest* req,
         v1::UnloadAdapterResponse* resp, std::function<void(grpc::Status)> cb) {
        stub->async()->UnloadAdapter(ctx, req, resp, std::move(cb));
      },
      [](std::vector<std::pair<std::string, v1::UnloadAdapterResponse>> ok) {
        v1::UnloadAdapterResponse out;
        int draining = 0;
        for (auto& [w, r] : ok) draining += r.draining_requests();
        out.set_draining_requests(draining);
        return out;
      },
      std::move(done));
}

void AdminFanout::ListAdapters(const std::vector<std::string>& workers,
                               const std::string& authorization,
                               std::function<void(absl::StatusOr<v1::ListAdaptersResponse>)> done) {
  Run<v1::ListAdaptersRequest, v1::ListAdaptersResponse>(
      workers, authorization, v1::ListAdaptersRequest(),
      [](v1::Admin::Stub* stub, grpc::ClientContext* ctx, const v1::ListAdaptersRequest* req,
         v1::ListAdaptersResponse* resp, std::function<void(grpc::Status)> cb) {
        stub->async()->ListAdapters(ctx, req, resp, std::move(cb));
      },
      [](std::vector<std::pair<std::string, v1::ListAdaptersResponse>> ok) {
        std::map<std::string, v1::AdapterInfo> by_id;
        for (auto& [w, r] : ok) {
          for (const v1::AdapterInfo& a : r.adapters()) by_id.emplace(a.id(), a);
        }
        v1::ListAdaptersResponse out;
        for (auto& [id, a] : by_id) *out.add_adapters() = a;
        return out;
      },
      std::move(done));
}

}  // namespace loom
