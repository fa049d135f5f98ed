#include "scheduler/worker/fake_worker.h"

#include <algorithm>
#include <utility>

namespace loom {

FakeWorker::FakeWorker(Options options) : options_(std::move(options)) {
  absl::MutexLock l(&mu_);
  stalled_ = options_.stall_at >= 0;
  thread_ = std::thread([this] { Loop(); });
}

FakeWorker::~FakeWorker() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

int32_t FakeWorker::NextToken(const std::string& adapter, const std::vector<int32_t>& context,
                              int32_t eos_id) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (char c : adapter) mix(static_cast<unsigned char>(c));
  mix(context.size());
  for (size_t i = context.size() >= 3 ? context.size() - 3 : 0; i < context.size(); ++i) {
    mix(static_cast<uint64_t>(context[i]));
  }
  h ^= h >> 29;
  if (eos_id >= 0 && h % 40 == 0) return eos_id;
  static constexpr char kLetters[] = "abcdefgh ";
  return 2 + static_cast<unsigned char>(kLetters[(h >> 7) % 9]);
}

absl::StatusOr<uint64_t> FakeWorker::Start(WorkerRequest request, WorkerCallback callback) {
  if (request.context.empty() || request.max_new_tokens < 1) {
    return absl::InvalidArgumentError("FakeWorker: empty context or max_new_tokens < 1");
  }
  if (request.adapter_id == "missing") {
    return absl::NotFoundError("adapter 'missing' not found");
  }
  absl::MutexLock l(&mu_);
  if (dead_) return absl::UnavailableError(options_.name + " is down");
  if (draining_) return absl::UnavailableError(options_.name + " is draining");
  started_.push_back(request);
  Stream s;
  s.handle = next_handle_++;
  s.request = std::move(request);
  s.callback = std::move(callback);
  streams_.push_back(std::move(s));
  return streams_.back().handle;
}

void FakeWorker::Cancel(uint64_t handle) {
  absl::MutexLock l(&mu_);
  for (Stream& s : streams_) {
    if (s.handle == handle) s.cancelled = true;
  }
}

absl::StatusOr<WorkerLoad> FakeWorker::Load() {
  absl::MutexLock l(&mu_);
  if (dead_) return absl::UnavailableError(options_.name + " is down");
  WorkerLoad load;
  const int n = static_cast<int>(streams_.size());
  load.running = std::min(n, options_.max_running);
  load.queued = n - load.running;
  load.kv_pages_total = options_.kv_pages_total;
  int32_t used = 0;
  std::vector<std::string> adapters;
  for (int i = 0; i < load.running; ++i) {
    const Stream& s = streams_[i];
    used += static_cast<int32_t>(s.request.context.size() + s.emitted + options_.kv_page_size) /
            options_.kv_page_size;
    adapters.push_back(s.request.adapter_id);
  }
  std::sort(adapters.begin(), adapters.end());
  adapters.erase(std::unique(adapters.begin(), adapters.end()), adapters.end());
  load.resident_adapters = std::move(adapters);
  load.kv_pages_free = std::max(0, options_.kv_pages_total - used);
  load.max_batch_size = options_.max_running;
  load.steps = steps_;
  load.draining = draining_;
  return load;
}

void FakeWorker::Kill() {
  std::deque<Stream> dying;
  {
    absl::MutexLock l(&mu_);
    dead_ = true;
    dying.swap(streams_);
  }
  for (Stream& s : dying) {
    WorkerEvent e;
    e.finished = true;
    e.error = absl::UnavailableError(options_.name + " died");
    s.callback(e);
  }
}

void FakeWorker::AbortAll() {
  std::deque<Stream> dropped;
  {
    absl::MutexLock l(&mu_);
    dropped.swap(streams_);
  }
  for (Stream& s : dropped) {
    WorkerEvent e;
    e.finished = true;
    e.error = absl::AbortedError("evicted");
    s.callback(e);
  }
}

void FakeWorker::SetDraining(bool draining) {
  absl::MutexLock l(&mu_);
  draining_ = draining;
}

void FakeWorker::Unstall() {
  absl::MutexLock l(&mu_);
  stalled_ = false;
}

int FakeWorker::active() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(streams_.size());
}

int FakeWorker::max_active_running() const {
  absl::MutexLock l(&mu_);
  return max_running_seen_;
}

std::vector<WorkerRequest> FakeWorker::started() const {
  absl::MutexLock l(&mu_);
  return started_;
}

void FakeWorker::Loop() {
  for (;;) {
    // (callback, event) pairs to deliver outside the lock, in order.
    std::vector<std::pair<WorkerCallback, WorkerEvent>> out;
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      ++steps_;
      const int running = std::min<int>(streams_.size(), options_.max_running);
      max_running_seen_ = std::max(max_running_seen_, running);
      for (int i = 0; i < running; ++i) {
        Stream& s = streams_[i];
        WorkerEvent e;
        if (s.cancelled) {
          if (options_.leak_after_cancel) {
            std::vector<int32_t> ctx = s.request.context;
            e.token_ids.push_back(NextToken(s.request.adapter_id, ctx, -1) + 1);
          }
          e.finished = true;
          e.error = absl::CancelledError("cancelled");
        } else {
          const int total = s.request.generated_before + s.emitted;
          if (stalled_ && options_.stall_at >= 0 && total >= options_.stall_at) continue;
          const int32_t tok = NextToken(s.request.adapter_id, s.request.context, options_.eos_id);
          s.request.context.push_back(tok);
          ++s.emitted;
          e.token_ids.push_back(tok);
          if (s.request.logprobs) e.logprobs.push_back(-0.5f);
          if (tok == options_.eos_id && s.request.stop_at_end_of_generation) {
            e.finished = true;
            e.end_of_generation = true;
          } else if (s.emitted >= s.request.max_new_tokens) {
            e.finished = true;
          }
        }
        s.done = e.finished;
        out.emplace_back(s.callback, std::move(e));
      }
      streams_.erase(std::remove_if(streams_.begin(), streams_.end(),
                                    [](const Stream& s) { return s.done; }),
                     streams_.end());
    }
    for (auto& [cb, ev] : out) cb(ev);
    absl::SleepFor(options_.step);
  }
}

}  // namespace loom
