#include "scheduler/cluster/cluster_frontend.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "scheduler/frontend/client_stream.h"

namespace loom {

struct ClusterFrontend::Request {
  uint64_t id = 0;
  StreamCallback callback;
  std::unique_ptr<ClientStream> stream;  // holds the request
  int worker = -1;          // index into workers_ while placed, else -1
  uint64_t handle = 0;      // the worker's handle of the current placement
  uint64_t epoch = 0;       // bumped at every placement and detach
  uint64_t admission_seq = 0;
  int replacements = 0;
  bool queued = false;      // in the router's queue
};

struct ClusterFrontend::WorkerSlot {
  std::unique_ptr<Worker> worker;
  WorkerView view;          // view.id = index into workers_
  WorkerLoad load;          // the last successful Load()
  bool up = false;
  bool draining = false;
  absl::Time failed_until = absl::InfinitePast();
  absl::Time idle_since;
  int assigned = 0;
};

struct ClusterFrontend::InboxItem {
  enum class Kind { kSubmit, kCancel, kEvent, kDrain, kUndrain, kAddWorker };
  Kind kind = Kind::kEvent;
  std::unique_ptr<Request> request;  // kSubmit
  uint64_t id = 0;                   // kCancel, kEvent
  uint64_t epoch = 0;                // kEvent
  WorkerEvent event;                 // kEvent
  std::string name;                  // kDrain, kUndrain
  std::unique_ptr<Worker> worker;    // kAddWorker
};

namespace {

bool IsWorkerLoss(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kAborted;
}

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterFrontend>> ClusterFrontend::Create(
    const Tokenizer* tokenizer, const ClusterOptions& options) {
  if (tokenizer == nullptr) return absl::InvalidArgumentError("ClusterFrontend: no tokenizer");
  if (options.tick <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ClusterFrontend: tick must be > 0");
  }
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> policy =
      CreatePlacementPolicy(options.policy, options.placement);
  if (!policy.ok()) return policy.status();
  RouterOptions ro;
  ro.max_queued = options.max_queued;
  auto router = std::make_unique<Router>(*std::move(policy), ro);
  std::unique_ptr<ClusterFrontend> f(new ClusterFrontend(tokenizer, options, std::move(router)));
  f->thread_ = std::thread([raw = f.get()] { raw->Loop(); });
  return f;
}

ClusterFrontend::ClusterFrontend(const Tokenizer* tokenizer, const ClusterOptions& options,
                                 std::unique_ptr<Router> router)
    : tokenizer_(tokenizer), options_(options), router_(std::move(router)) {}

ClusterFrontend::~ClusterFrontend() {
  Shutdown(absl::ZeroDuration());
  if (thread_.joinable()) thread_.join();
  // Workers may still call back while they stop: destroy them while mu_ is alive.
  workers_.clear();
}

void ClusterFrontend::Post(InboxItem item) {
  absl::MutexLock l(&mu_);
  inbox_.push_back(std::move(item));
}

absl::Status ClusterFrontend::AddWorker(std::unique_ptr<Worker> worker) {
  if (worker == nullptr) return absl::InvalidArgumentError("AddWorker: null worker");
  absl::MutexLock l(&mu_);
  if (std::find(names_.begin(), names_.end(), worker->name()) != names_.end()) {
    return absl::AlreadyExistsError(absl::StrFormat("worker '%s' exists", worker->name()));
  }
  names_.push_back(worker->name());
  InboxItem item;
  item.kind = InboxItem::Kind::kAddWorker;
  item.worker = std::move(worker);
  inbox_.push_back(std::move(item));
  return absl::OkStatus();
}

bool ClusterFrontend::HasWorker(const std::string& name) const {
  absl::MutexLock l(&mu_);
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

absl::StatusOr<uint64_t> ClusterFrontend::Submit(FrontendRequest request,
                                                 StreamCallback callback) {
  absl::StatusOr<std::unique_ptr<ClientStream>> stream =
      ClientStream::Create(*tokenizer_, std::move(request));
  if (!stream.ok()) return stream.status();
  auto r = std::make_unique<Request>();
  r->callback = std::move(callback);
  r->stream = *std::move(stream);
  absl::MutexLock l(&mu_);
  if (stopping_) return absl::UnavailableError("server is shutting down");
  r->id = next_id_++;
  const uint64_t id = r->id;
  InboxItem item;
  item.kind = InboxItem::Kind::kSubmit;
  item.request = std::move(r);
  inbox_.push_back(std::move(item));
  return id;
}

void ClusterFrontend::Cancel(uint64_t id) {
  InboxItem item;
  item.kind = InboxItem::Kind::kCancel;
  item.id = id;
  Post(std::move(item));
}

absl::Status ClusterFrontend::Drain(const std::string& worker, bool undrain) {
  absl::MutexLock l(&mu_);
  if (std::find(names_.begin(), names_.end(), worker) == names_.end()) {
    return absl::NotFoundError(absl::StrFormat("no worker named '%s'", worker));
  }
  InboxItem item;
  item.kind = undrain ? InboxItem::Kind::kUndrain : InboxItem::Kind::kDrain;
  item.name = worker;
  inbox_.push_back(std::move(item));
  return absl::OkStatus();
}

ClusterStatus ClusterFrontend::GetStatus() const {
  absl::MutexLock l(&mu_);
  return status_;
}

void ClusterFrontend::Shutdown(absl::Duration grace) {
  absl::MutexLock l(&mu_);
  stopping_ = true;
  hard_stop_ = std::min(hard_stop_, absl::Now() + grace);
  mu_.Await(absl::Condition(&stopped_));
}

// ---- control thread ----

void ClusterFrontend::Loop() {
  for (;;) {
    std::deque<InboxItem> items;
    bool stopping = false;
    absl::Time hard_stop;
    {
      absl::MutexLock l(&mu_);
      auto has_input = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !inbox_.empty(); };
      mu_.AwaitWithDeadline(absl::Condition(&has_input), next_tick_);
      items.swap(inbox_);
      stopping = stopping_;
      hard_stop = hard_stop_;
    }
    for (InboxItem& item : items) Process(item);
    absl::Time now = absl::Now();
    if (now >= next_tick_) {
      Tick(now);
      next_tick_ = now + options_.tick;
    } else {
      PlaceQueued();
    }
    if (stopping && (requests_.empty() || now >= hard_stop)) {
      std::vector<uint64_t> ids;
      for (auto& [id, r] : requests_) ids.push_back(id);
      for (uint64_t id : ids) {
        Request* r = requests_.at(id).get();
        End(r, r->stream->Finish(absl::UnavailableError("server is shutting down"), false));
      }
      Publish(now);
      absl::MutexLock l(&mu_);
      stopped_ = true;
      return;
    }
    Publish(now);
  }
}

void ClusterFrontend::Process(InboxItem& item) {
  switch (item.kind) {
    case InboxItem::Kind::kSubmit: {
      Request* r = item.request.get();
      requests_[r->id] = std::move(item.request);
      PlaceNew(r);
      return;
    }
    case InboxItem::Kind::kCancel: {
      auto it = requests_.find(item.id);
      if (it == requests_.end()) return;
      Request* r = it->second.get();
      End(r, r->stream->Finish(absl::CancelledError("request cancelled"), false));
      return;
    }
    case InboxItem::Kind::kEvent:
      OnWorkerEvent(item.id, item.epoch, item.event);
      return;
    case InboxItem::Kind::kDrain:
    case InboxItem::Kind::kUndrain:
      for (auto& slot : workers_) {
        if (slot->worker->name() != item.name) continue;
        slot->draining = item.kind == InboxItem::Kind::kDrain;
        slot->view.draining = slot->draining;
      }
      next_tick_ = absl::InfinitePast();  // plan the drain now
      return;
    case InboxItem::Kind::kAddWorker: {
      auto slot = std::make_unique<WorkerSlot>();
      slot->worker = std::move(item.worker);
      slot->view.id = static_cast<int>(workers_.size());
      slot->idle_since = absl::Now();
      workers_.push_back(std::move(slot));
      next_tick_ = absl::InfinitePast();  // refresh its load now
      return;
    }
  }
}

void ClusterFrontend::OnWorkerEvent(uint64_t id, uint64_t epoch, const WorkerEvent& e) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request* r = it->second.get();
  // A cancelled (migrated, failed over) placement's late tokens and final event.
  if (epoch != r->epoch || r->worker < 0) return;
  if (!e.token_ids.empty()) {
    StreamEvent ev = r->stream->OnTokens(e);
    if (ev.finished) return End(r, std::move(ev));
    if (r->callback && (!ev.text.empty() || !ev.token_ids.empty())) r->callback(ev);
  }
  if (!e.finished) return;
  if (e.error.ok()) return End(r, r->stream->Finish(absl::OkStatus(), e.end_of_generation));
  if (!IsWorkerLoss(e.error)) return End(r, r->stream->Finish(e.error, false));
  // kUnavailable: the worker is probably gone; place nothing new there for a while. Its
  // other requests stay: if it is gone their streams end too (or its Load() fails and
  // FailWorker moves them), and if it was one request's trouble they are not disturbed.
  if (e.error.code() == absl::StatusCode::kUnavailable) Suspect(r->worker, absl::Now());
  ++failovers_;
  Replace(r, /*failover=*/true);
}

void ClusterFrontend::Suspect(int w, absl::Time now) {
  WorkerSlot& slot = *workers_[w];
  slot.up = false;
  slot.failed_until = now + options_.failure_backoff;
}

void ClusterFrontend::Tick(absl::Time now) {
  RefreshViews(now);
  // Deadlines.
  std::vector<uint64_t> expired;
  for (auto& [id, r] : requests_) {
    if (now > r->stream->request().deadline) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    Request* r = requests_.at(id).get();
    End(r, r->stream->Finish(absl::DeadlineExceededError("request deadline exceeded"), false));
  }
  // Drains: move everything off draining workers.
  for (size_t w = 0; w < workers_.size(); ++w) {
    WorkerSlot& slot = *workers_[w];
    if (!slot.draining || slot.assigned == 0) continue;
    std::vector<RunningRequest> running = RunningOn(static_cast<int>(w));
    std::vector<WorkerView> views = UpViews();
    if (!slot.up) continue;  // its requests fail over instead
    std::vector<loom::Move> moves =
        PlanDrain(static_cast<int>(w), running, absl::MakeSpan(views), router_->policy());
    WriteBackViews(views);
    for (const loom::Move& m : moves) Move(m, /*failover=*/false);
  }
  // Punica consolidation: empty the least-loaded worker onto fuller ones.
  if (options_.policy == "punica" && options_.consolidation_interval > absl::ZeroDuration() &&
      now >= next_consolidation_ && router_->queued() == 0) {
    next_consolidation_ = now + options_.consolidation_interval;
    std::vector<RunningRequest> running = RunningOn(-1);
    std::vector<WorkerView> views = UpViews();
    std::vector<loom::Move> moves = PlanConsolidation(
        running, absl::MakeSpan(views), router_->placement_options(), options_.consolidation);
    WriteBackViews(views);
    for (const loom::Move& m : moves) Move(m, /*failover=*/false);
  }
  PlaceQueued();
}

void ClusterFrontend::RefreshViews(absl::Time now) {
  for (size_t w = 0; w < workers_.size(); ++w) {
    WorkerSlot& slot = *workers_[w];
    absl::StatusOr<WorkerLoad> load = slot.worker->Load();
    if (!load.ok()) {
      if (slot.up || slot.assigned > 0) FailWorker(static_cast<int>(w), now);
      slot.up = false;
      continue;
    }
    slot.load = *std::move(load);
    slot.up = now >= slot.failed_until;
    slot.view.kv_pages_free = slot.load.kv_pages_free;
    slot.view.kv_pages_total = slot.load.kv_pages_total;
    slot.view.resident_adapters = slot.load.resident_adapters;
    slot.view.draining = slot.draining || slot.load.draining;
  }
}

std::vector<WorkerView> ClusterFrontend::UpViews() {
  std::vector<WorkerView> out;
  for (auto& slot : workers_) {
    if (!slot->up) continue;
    WorkerView v = slot->view;
    v.running = std::min(slot->load.running, slot->assigned);
    v.queued = slot->assigned - v.running;
    // Drained by us, or shutting down on its own (its running requests finish there).
    v.draining = slot->draining || slot->load.draining;
    v.idle_since_us = slot->assigned == 0 ? Micros(slot->idle_since) : -1;
    out.push_back(std::move(v));
  }
  return out;
}

void ClusterFrontend::WriteBackViews(const std::vector<WorkerView>& views) {
  // Request counts come from `assigned`; keep what the router updated besides them.
  for (const WorkerView& v : views) {
    WorkerView& dst = workers_[v.id]->view;
    dst.kv_pages_free = v.kv_pages_free;
    dst.resident_adapters = v.resident_adapters;
  }
}

PlacementRequest ClusterFrontend::ReAddForm(const Request& r) const {
  PlacementRequest p;
  p.id = r.id;
  p.adapter_id = r.stream->request().adapter_id;
  p.context_tokens =
      static_cast<int>(r.stream->request().prompt.size() + r.stream->generated().size());
  p.max_new_tokens = r.stream->remaining();
  return p;
}

std::vector<RunningRequest> ClusterFrontend::RunningOn(int worker) const {
  std::vector<RunningRequest> out;
  for (const auto& [id, r] : requests_) {
    if (r->worker < 0 || (worker >= 0 && r->worker != worker)) continue;
    RunningRequest rr;
    rr.request = ReAddForm(*r);
    rr.worker_id = r->worker;
    rr.kv_pages = PagesNeeded(rr.request, router_->placement_options());
    rr.admission_seq = r->admission_seq;
    out.push_back(std::move(rr));
  }
  std::sort(out.begin(), out.end(), [](const RunningRequest& a, const RunningRequest& b) {
    return a.admission_seq < b.admission_seq;
  });
  return out;
}

void ClusterFrontend::PlaceNew(Request* r) {
  std::vector<WorkerView> views = UpViews();
  absl::StatusOr<std::optional<int>> placed =
      router_->Submit(ReAddForm(*r), absl::MakeSpan(views));
  if (!placed.ok()) return End(r, r->stream->Finish(placed.status(), false));
  WriteBackViews(views);
  if (!placed->has_value()) {
    r->queued = true;
    return;
  }
  StartOn(r, **placed);
}

void ClusterFrontend::PlaceQueued() {
  if (router_->queued() == 0) return;
  std::vector<WorkerView> views = UpViews();
  std::vector<Assignment> assignments = router_->DrainQueue(absl::MakeSpan(views));
  WriteBackViews(views);
  for (const Assignment& a : assignments) {
    auto it = requests_.find(a.request_id);
    if (it == requests_.end()) continue;
    it->second->queued = false;
    StartOn(it->second.get(), a.worker_id);
  }
}

void ClusterFrontend::StartOn(Request* r, int w) {
  WorkerSlot& slot = *workers_[w];
  WorkerRequest wr = r->stream->Placement();
  const uint64_t epoch = ++r->epoch;
  const uint64_t id = r->id;
  r->worker = w;
  r->admission_seq = ++admission_counter_;
  ++slot.assigned;
  absl::StatusOr<uint64_t> handle =
      slot.worker->Start(std::move(wr), [this, id, epoch](const WorkerEvent& e) {
        InboxItem item;
        item.kind = InboxItem::Kind::kEvent;
        item.id = id;
        item.epoch = epoch;
        item.event = e;
        Post(std::move(item));
      });
  if (handle.ok()) {
    r->handle = *handle;
    return;
  }
  r->worker = -1;
  --slot.assigned;
  ++r->epoch;
  if (slot.assigned == 0) slot.idle_since = absl::Now();
  if (IsWorkerLoss(handle.status())) {
    if (handle.status().code() == absl::StatusCode::kUnavailable) Suspect(w, absl::Now());
    ++failovers_;
    Replace(r, /*failover=*/true);
    return;
  }
  End(r, r->stream->Finish(handle.status(), false));
}

void ClusterFrontend::Detach(Request* r) {
  if (r->queued) {
    router_->CancelQueued(r->id);
    r->queued = false;
  }
  if (r->worker < 0) return;
  WorkerSlot& slot = *workers_[r->worker];
  slot.worker->Cancel(r->handle);
  if (--slot.assigned == 0) slot.idle_since = absl::Now();
  r->worker = -1;
  ++r->epoch;  // anything the old placement still sends is dropped
}

void ClusterFrontend::Replace(Request* r, bool failover) {
  Detach(r);
  if (++r->replacements > options_.max_replacements) {
    return End(r, r->stream->Finish(
                      absl::UnavailableError(absl::StrFormat(
                          "request was re-placed %d times without finishing",
                          options_.max_replacements)),
                      false));
  }
  (void)failover;
  router_->Requeue(ReAddForm(*r));
  r->queued = true;
}

void ClusterFrontend::FailWorker(int w, absl::Time now) {
  Suspect(w, now);
  // Re-add in admission order so the oldest lands at the front of the queue last-in
  // first: Requeue pushes to the front, so go newest first.
  std::vector<RunningRequest> running = RunningOn(w);
  for (auto it = running.rbegin(); it != running.rend(); ++it) {
    ++failovers_;
    Replace(requests_.at(it->request.id).get(), /*failover=*/true);
  }
}

void ClusterFrontend::Move(const loom::Move& m, bool failover) {
  auto it = requests_.find(m.request_id);
  if (it == requests_.end()) return;
  Request* r = it->second.get();
  ++migrations_;
  if (m.to_worker < 0 || !workers_[m.to_worker]->up) return Replace(r, failover);
  Detach(r);
  StartOn(r, m.to_worker);
}

void ClusterFrontend::End(Request* r, StreamEvent final_event) {
  Detach(r);
  ++completed_;
  const uint64_t id = r->id;
  if (r->callback) r->callback(final_event);
  requests_.erase(id);
}

void ClusterFrontend::Publish(absl::Time now) {
  ClusterStatus s;
  std::vector<WorkerView> views;
  for (auto& slot : workers_) {
    ClusterWorkerStatus w;
    w.name = slot->worker->name();
    w.up = slot->up;
    w.draining = slot->draining || slot->load.draining;
    w.assigned = slot->assigned;
    w.load = slot->load;
    s.workers.push_back(std::move(w));
  }
  views = UpViews();
  const ScaleSignals sig =
      ComputeScaleSignals(views, router_->queued(), Micros(now),
                          absl::ToInt64Microseconds(options_.idle_grace));
  for (int id : sig.idle_workers) {
    s.workers[id].idle = true;
    s.idle_workers.push_back(s.workers[id].name);
  }
  s.want_more = sig.want_more;
  s.queued = router_->queued();
  s.active = static_cast<int>(requests_.size());
  s.migrations = migrations_;
  s.failovers = failovers_;
  s.completed = completed_;
  std::set<std::string> running, waiting;
  for (const auto& [id, r] : requests_) {
    const std::string& a = r->stream->request().adapter_id;
    if (a.empty()) continue;
    (r->worker >= 0 ? running : waiting).insert(a);
  }
  s.running_adapters.assign(running.begin(), running.end());
  s.waiting_adapters.assign(waiting.begin(), waiting.end());
  absl::MutexLock l(&mu_);
  status_ = std::move(s);
}

}  // namespace loom
