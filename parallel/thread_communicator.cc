#include "parallel/thread_communicator.h"

#include <cstring>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace loom {
namespace {

enum class Op { kAllReduceSum, kAllGather, kBroadcast, kBarrier };

const char* OpName(Op op) {
  switch (op) {
    case Op::kAllReduceSum: return "AllReduceSum";
    case Op::kAllGather: return "AllGather";
    case Op::kBroadcast: return "Broadcast";
    case Op::kBarrier: return "Barrier";
  }
  return "?";
}

// One rank's side of a collective.
struct Call {
  Op op = Op::kBarrier;
  size_t n = 0;
  int root = 0;
  const float* in = nullptr;
  float* out = nullptr;
};

// State shared by the W endpoints.
class Group {
 public:
  Group(int world_size, absl::Duration timeout)
      : world_size_(world_size), timeout_(timeout), calls_(world_size),
        here_(world_size, false) {}

  int world_size() const { return world_size_; }

  // First rendezvous: registers `call`, waits for every rank, checks that the calls agree
  // and runs `last` (under the lock) in the last rank to arrive. On OK, calls() holds every
  // rank's call until Release.
  absl::Status Enter(int rank, const Call& call, const std::function<void()>& last) {
    absl::MutexLock lock(&mu_);
    calls_[rank] = call;
    return RendezvousLocked(rank, call.op, [&] {
      if (absl::Status s = CheckCallsLocked(); !s.ok()) {
        failed_ = s;
        return;
      }
      if (last) last();
    });
  }

  // Second rendezvous: the calls and the shared result stay valid until every rank is here.
  absl::Status Release(int rank, Op op) {
    absl::MutexLock lock(&mu_);
    return RendezvousLocked(rank, op, nullptr);
  }

  void Abort(int rank, const absl::Status& reason) {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) {
      failed_ = absl::Status(reason.ok() ? absl::StatusCode::kAborted : reason.code(),
                             absl::StrCat("rank ", rank, " aborted the group: ",
                                          reason.message()));
    }
    cv_.SignalAll();
  }

  // Valid between Enter and Release (read-only).
  const std::vector<Call>& calls() const { return calls_; }
  const std::vector<float>& sum() const { return sum_; }

  // Run by the last rank of an AllReduceSum's first rendezvous.
  void SumLocked(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sum_.resize(n);
    std::memcpy(sum_.data(), calls_[0].in, n * sizeof(float));
    for (int r = 1; r < world_size_; ++r) {
      const float* x = calls_[r].in;
      for (size_t i = 0; i < n; ++i) sum_[i] += x[i];
    }
  }

 private:
  absl::Status RendezvousLocked(int rank, Op op, const std::function<void()>& last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!failed_.ok()) return failed_;
    const uint64_t gen = generation_;
    here_[rank] = true;
    if (++arrived_ == world_size_) {
      if (last) last();
      arrived_ = 0;
      here_.assign(world_size_, false);
      ++generation_;
      cv_.SignalAll();
      return failed_;
    }
    const absl::Time deadline = absl::Now() + timeout_;
    while (generation_ == gen && failed_.ok()) {
      if (cv_.WaitWithDeadline(&mu_, deadline) && generation_ == gen && failed_.ok()) {
        std::vector<int> missing;
        for (int r = 0; r < world_size_; ++r) {
          if (!here_[r]) missing.push_back(r);
        }
        failed_ = absl::DeadlineExceededError(absl::StrFormat(
            "ThreadCommunicator: rank %d waited %s in %s for rank(s) %s", rank,
            absl::FormatDuration(timeout_), OpName(op), absl::StrJoin(missing, ", ")));
        cv_.SignalAll();
      }
    }
    return failed_;
  }

  absl::Status CheckCallsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Call& c0 = calls_[0];
    for (int r = 0; r < world_size_; ++r) {
      const Call& c = calls_[r];
      if (c.op != c0.op || c.n != c0.n || c.root != c0.root) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "ThreadCommunicator: ranks disagree: rank 0 called %s(n=%d, root=%d), rank %d "
            "called %s(n=%d, root=%d)",
            OpName(c0.op), c0.n, c0.root, r, OpName(c.op), c.n, c.root));
      }
      if (c.n > 0 && (c.out == nullptr || (c.op != Op::kBroadcast && c.in == nullptr))) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "ThreadCommunicator: rank %d passed a null buffer to %s", r, OpName(c.op)));
      }
    }
    if (c0.op == Op::kBroadcast && (c0.root < 0 || c0.root >= world_size_)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ThreadCommunicator: Broadcast root %d outside [0, %d)", c0.root, world_size_));
    }
    return absl::OkStatus();
  }

  const int world_size_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // completed rendezvous
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);      // sticky
  std::vector<Call> calls_;                       // written under mu_, read between phases
  std::vector<bool> here_ ABSL_GUARDED_BY(mu_);
  std::vector<float> sum_;                        // written by the last arriver under mu_
};

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }

  absl::Status AllReduceSum(float* buf, size_t n) override {
    Call c{Op::kAllReduceSum, n, 0, buf, buf};
    Group* g = group_.get();
    if (absl::Status s = g->Enter(rank_, c, [g, n] { g->SumLocked(n); }); !s.ok()) return s;
    if (n > 0) std::memcpy(buf, g->sum().data(), n * sizeof(float));
    return g->Release(rank_, c.op);
  }

  absl::Status AllGather(const float* in, size_t n_per_rank, float* out) override {
    Call c{Op::kAllGather, n_per_rank, 0, in, out};
    if (absl::Status s = group_->Enter(rank_, c, nullptr); !s.ok()) return s;
    const std::vector<Call>& calls = group_->calls();
    for (int r = 0; r < world_size(); ++r) {
      float* dst = out + static_cast<size_t>(r) * n_per_rank;
      if (n_per_rank > 0 && dst != calls[r].in) {
        std::memcpy(dst, calls[r].in, n_per_rank * sizeof(float));
      }
    }
    return group_->Release(rank_, c.op);
  }

  absl::Status Broadcast(float* buf, size_t n, int root) override {
    Call c{Op::kBroadcast, n, root, nullptr, buf};
    if (absl::Status s = group_->Enter(rank_, c, nullptr); !s.ok()) return s;
    if (rank_ != root && n > 0) {
      std::memcpy(buf, group_->calls()[root].out, n * sizeof(float));
    }
    return group_->Release(rank_, c.op);
  }

  absl::Status Barrier() override {
    Call c{Op::kBarrier, 0, 0, nullptr, nullptr};
    if (absl::Status s = group_->Enter(rank_, c, nullptr); !s.ok()) return s;
    return group_->Release(rank_, c.op);
  }

  void Abort(const absl::Status& reason) override { group_->Abort(rank_, reason); }

 private:
  std::shared_ptr<Group> group_;
  const int rank_;
};

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> CreateThreadCommunicators(
    int world_size, const ThreadCommunicatorOptions& options) {
  if (world_size < 1 || world_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CreateThreadCommunicators: world_size %d outside [1, 1024]",
                        world_size));
  }
  auto group = std::make_shared<Group>(world_size, options.timeout);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < world_size; ++r) {
    out.push_back(std::make_unique<ThreadCommunicator>(group, r));
  }
  return out;
}

}  // namespace loom
