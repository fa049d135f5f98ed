#include "scheduler/cluster/remote_worker.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "scheduler/cluster/worker_proto.h"
#include "clients/cpp/grpc_status.h"

namespace loom {

namespace pb = internal::v1;

// One Generate call. Owned by RemoteWorker::streams_ (and briefly by FailAllStreams);
// gRPC is done with it once OnDone returns, which also removes it from streams_.
class RemoteWorker::Stream final : public grpc::ClientReadReactor<pb::WorkerGenerateResponse> {
 public:
  Stream(RemoteWorker* owner, uint64_t handle, WorkerCallback callback)
      : owner_(owner), handle_(handle), callback_(std::move(callback)) {}

  grpc::ClientContext* context() { return &ctx_; }
  pb::WorkerGenerateRequest* request() { return &request_; }

  void Begin() {
    StartRead(&response_);
    StartCall();
  }

  // Our own Cancel: the CANCELLED status that follows is reported as such.
  void RequestCancel() {
    cancel_requested_.store(true, std::memory_order_release);
    ctx_.TryCancel();
  }

  // The worker is lost: finish now with kUnavailable, then cancel the call.
  void Fail(const std::string& why) {
    WorkerEvent ev;
    ev.finished = true;
    ev.error = absl::UnavailableError(why);
    Deliver(ev);
    ctx_.TryCancel();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone has the status
    absl::StatusOr<WorkerEvent> ev = FromProto(response_);
    if (!ev.ok()) {
      Fail(absl::StrCat("worker ", owner_->name(), " sent a malformed message: ",
                        ev.status().message()));
      return;
    }
    if (ev->finished) final_received_ = true;
    Deliver(*ev);
    StartRead(&response_);  // until the stream ends (then OnReadDone(false))
  }

  void OnDone(const grpc::Status& status) override {
    WorkerEvent ev;
    ev.finished = true;
    if (!final_received_) {
      absl::Status s = FromGrpcStatus(status);
      const bool ours = cancel_requested_.load(std::memory_order_acquire);
      if (s.ok()) {
        s = absl::UnavailableError(
            absl::StrCat("worker ", owner_->name(), " ended the stream without a final message"));
      } else if (s.code() == absl::StatusCode::kCancelled && !ours) {
        s = absl::UnavailableError(
            absl::StrCat("worker ", owner_->name(), " dropped the stream: ", s.message()));
      }
      ev.error = std::move(s);
      Deliver(ev);  // no-op when the finished event was already delivered
    }
    owner_->Remove(handle_);  // may destroy this: nothing after it
  }

 private:
  // Delivers in order, the finished event exactly once.
  void Deliver(const WorkerEvent& ev) {
    absl::MutexLock l(&deliver_mu_);
    if (finished_) return;
    if (ev.finished) finished_ = true;
    callback_(ev);
  }

  RemoteWorker* const owner_;
  const uint64_t handle_;
  const WorkerCallback callback_;
  grpc::ClientContext ctx_;
  pb::WorkerGenerateRequest request_;
  pb::WorkerGenerateResponse response_;
  bool final_received_ = false;  // reactor callbacks only (serialised by gRPC)
  std::atomic<bool> cancel_requested_{false};
  absl::Mutex deliver_mu_;
  bool finished_ ABSL_GUARDED_BY(deliver_mu_) = false;
};

absl::StatusOr<std::unique_ptr<RemoteWorker>> RemoteWorker::Create(RemoteWorkerOptions o) {
  if (o.target.empty()) return absl::InvalidArgumentError("remote worker target is empty");
  if (o.heartbeat_interval <= absl::ZeroDuration() ||
      o.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "remote worker heartbeat_interval and connect_timeout must be > 0");
  }
  if (o.missed_heartbeats < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "remote worker missed_heartbeats = ", o.missed_heartbeats, " must be >= 1"));
  }
  std::unique_ptr<RemoteWorker> w(new RemoteWorker(std::move(o)));
  w->heartbeat_ = std::thread([raw = w.get()] { raw->HeartbeatLoop(); });
  return w;
}

RemoteWorker::RemoteWorker(RemoteWorkerOptions options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  // Reconnect soon after a worker restarts (the default backoff grows to minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  channel_ = grpc::CreateCustomChannel(
      options_.target,
      options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = pb::Worker::NewStub(channel_);
}

RemoteWorker::~RemoteWorker() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
  std::vector<std::shared_ptr<Stream>> open;
  {
    absl::MutexLock l(&mu_);
    for (auto& [handle, s] : streams_) open.push_back(s);
  }
  for (auto& s : open) s->RequestCancel();
  open.clear();
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](std::map<uint64_t, std::shared_ptr<Stream>>* m) { return m->empty(); }, &streams_));
}

absl::StatusOr<uint64_t> RemoteWorker::Start(WorkerRequest request, WorkerCallback callback) {
  std::shared_ptr<Stream> stream;
  uint64_t handle = 0;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return absl::UnavailableError("remote worker is shutting down");
    if (!ready_) {
      return absl::UnavailableError(
          absl::StrCat("worker ", name(), " is unavailable: ", last_error_.message()));
    }
    handle = next_handle_++;
    stream = std::make_shared<Stream>(this, handle, std::move(callback));
    streams_.emplace(handle, stream);
  }
  *stream->request() = ToProto(request);
  if (request.deadline != absl::InfiniteFuture()) {
    stream->context()->set_deadline(absl::ToChronoTime(request.deadline));
  }
  stub_->async()->Generate(stream->context(), stream->request(), stream.get());
  stream->Begin();
  return handle;
}

void RemoteWorker::Cancel(uint64_t handle) {
  std::shared_ptr<Stream> stream;
  {
    absl::MutexLock l(&mu_);
    auto it = streams_.find(handle);
    if (it == streams_.end()) return;
    stream = it->second;
  }
  stream->RequestCancel();
}

absl::StatusOr<WorkerLoad> RemoteWorker::Load() {
  absl::MutexLock l(&mu_);
  if (!ready_) {
    return absl::UnavailableError(
        absl::StrCat("worker ", name(), " is unavailable: ", last_error_.message()));
  }
  return load_;
}

absl::Status RemoteWorker::WaitUntilReady(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  if (mu_.AwaitWithTimeout(absl::Condition(&ready_), timeout)) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("worker ", name(), " not ready after ",
                                                  absl::FormatDuration(timeout), ": ",
                                                  last_error_.message()));
}

void RemoteWorker::Remove(uint64_t handle) {
  std::shared_ptr<Stream> last;  // destroyed after the lock is released
  absl::MutexLock l(&mu_);
  auto it = streams_.find(handle);
  if (it == streams_.end()) return;
  last = std::move(it->second);
  streams_.erase(it);
}

void RemoteWorker::FailAllStreams(const std::string& why) {
  std::vector<std::shared_ptr<Stream>> open;
  {
    absl::MutexLock l(&mu_);
    for (auto& [handle, s] : streams_) open.push_back(s);
  }
  for (auto& s : open) s->Fail(why);
}

void RemoteWorker::HeartbeatLoop() {
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.connect_timeout));
    pb::HeartbeatRequest request;
    pb::WorkerLoadReport report;
    const grpc::Status status = stub_->Heartbeat(&ctx, request, &report);
    bool lost_now = false;
    std::string why;
    {
      absl::MutexLock l(&mu_);
      if (status.ok()) {
        load_ = FromProto(report);
        ready_ = true;
        misses_ = 0;
        last_error_ = absl::OkStatus();
      } else {
        last_error_ = FromGrpcStatus(status);
        if (++misses_ >= options_.missed_heartbeats && ready_) {
          ready_ = false;
          lost_now = true;
          why = absl::StrCat("worker ", name(), " missed ", misses_,
                             " heartbeats: ", last_error_.message());
        }
      }
    }
    if (lost_now) FailAllStreams(why);
    absl::MutexLock l(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.heartbeat_interval)) return;
  }
}

}  // namespace loom
