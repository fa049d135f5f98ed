// ThreadCommunicator against serial references: rank-order sums (bitwise, whatever the
// arrival order), gathers, broadcasts, many mixed rounds for W = 1..4, and the failure
// paths (mismatched calls, a rank that never comes, an abort) returning a Status on every
// rank instead of hanging.
#include "parallel/thread_communicator.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

using Comms = std::vector<std::unique_ptr<Communicator>>;

Comms MakeComms(int w, absl::Duration timeout = absl::Minutes(1)) {
  ThreadCommunicatorOptions o;
  o.timeout = timeout;
  auto c = CreateThreadCommunicators(w, o);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

// Runs fn(rank) on one thread per rank and joins them.
void RunRanks(int w, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

std::vector<float> RandomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng) * std::pow(10.0f, static_cast<int>(rng() % 7) - 3);
  return v;
}

bool Bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(ThreadCommunicatorTest, RejectsBadWorldSize) {
  EXPECT_EQ(CreateThreadCommunicators(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateThreadCommunicators(1025).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ThreadCommunicatorTest, RanksAndWorldSize) {
  Comms c = MakeComms(3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(c[r]->rank(), r);
    EXPECT_EQ(c[r]->world_size(), 3);
  }
}

// The sum is ((b0 + b1) + b2): 1e8 + 1 rounds back to 1e8, so rank order gives 0 where
// any other order (e.g. (b0 + b2) + b1 = 1) would not; ranks arrive in reverse order.
TEST(ThreadCommunicatorTest, AllReduceSumsInRankOrderWhateverTheArrivalOrder) {
  Comms c = MakeComms(3);
  const float vals[3] = {1e8f, 1.0f, -1e8f};
  std::vector<std::vector<float>> bufs(3);
  std::vector<absl::Status> st(3);
  RunRanks(3, [&](int r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * (2 - r)));
    bufs[r].assign(5, vals[r]);
    st[r] = c[r]->AllReduceSum(bufs[r].data(), bufs[r].size());
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r];
    for (float x : bufs[r]) EXPECT_EQ(x, 0.0f) << "rank " << r;
  }
}

TEST(ThreadCommunicatorTest, ManyMixedRoundsMatchSerialReference) {
  for (int w = 1; w <= 4; ++w) {
    Comms c = MakeComms(w);
    constexpr int kRounds = 150;
    std::vector<int> failures(w, 0);
    RunRanks(w, [&](int r) {
      std::mt19937 jitter(100 + r);
      for (int round = 0; round < kRounds; ++round) {
        const size_t n = (round * 37) % 300;  // includes n = 0
        if (jitter() % 4 == 0) std::this_thread::yield();
        std::vector<std::vector<float>> in(w);
        for (int q = 0; q < w; ++q) in[q] = RandomVec(n, round * 16 + q);
        switch (round % 3) {
          case 0: {  // AllReduceSum vs the serial rank-order sum
            std::vector<float> want = in[0];
            for (int q = 1; q < w; ++q) {
              for (size_t i = 0; i < n; ++i) want[i] += in[q][i];
            }
            std::vector<float> buf = in[r];
            if (!c[r]->AllReduceSum(buf.data(), n).ok() || !Bitwise(buf, want)) ++failures[r];
            break;
          }
          case 1: {  // AllGather, in place on odd rounds
            std::vector<float> want, out(n * w, -1.0f);
            for (int q = 0; q < w; ++q) want.insert(want.end(), in[q].begin(), in[q].end());
            const float* src = in[r].data();
            if (round % 2 == 1) {
              std::copy(in[r].begin(), in[r].end(), out.begin() + r * n);
              src = out.data() + r * n;
            }
            if (!c[r]->AllGather(src, n, out.data()).ok() || !Bitwise(out, want)) ++failures[r];
            break;
          }
          case 2: {  // Broadcast from a rotating root
            const int root = round % w;
            std::vector<float> buf = in[r];
            if (!c[r]->Broadcast(buf.data(), n, root).ok() || !Bitwise(buf, in[root])) {
              ++failures[r];
            }
            if (!c[r]->Barrier().ok()) ++failures[r];
            break;
          }
        }
      }
    });
    for (int r = 0; r < w; ++r) EXPECT_EQ(failures[r], 0) << "W=" << w << " rank " << r;
  }
}

TEST(ThreadCommunicatorTest, MismatchedCallsFailEveryRankAndStayFailed) {
  Comms c = MakeComms(2);
  std::vector<absl::Status> st(2), after(2);
  RunRanks(2, [&](int r) {
    std::vector<float> buf(5, 1.0f);
    st[r] = c[r]->AllReduceSum(buf.data(), r == 0 ? 4 : 5);
    after[r] = c[r]->Barrier();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), absl::StatusCode::kInvalidArgument) << st[r];
    EXPECT_NE(st[r].message().find("disagree"), std::string::npos) << st[r];
    EXPECT_EQ(after[r].code(), absl::StatusCode::kInvalidArgument) << after[r];
  }
}

TEST(ThreadCommunicatorTest, DifferentOpsFail) {
  Comms c = MakeComms(2);
  std::vector<absl::Status> st(2);
  RunRanks(2, [&](int r) {
    std::vector<float> buf(4, 1.0f);
    st[r] = r == 0 ? c[r]->AllReduceSum(buf.data(), 4) : c[r]->Broadcast(buf.data(), 4, 0);
  });
  EXPECT_EQ(st[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st[1].code(), absl::StatusCode::kInvalidArgument);
}

TEST(ThreadCommunicatorTest, BadBroadcastRootFails) {
  Comms c = MakeComms(2);
  std::vector<absl::Status> st(2);
  RunRanks(2, [&](int r) {
    float x = 1.0f;
    st[r] = c[r]->Broadcast(&x, 1, 2);
  });
  EXPECT_EQ(st[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st[1].code(), absl::StatusCode::kInvalidArgument);
}

// Rank 2 never arrives: the others get DeadlineExceeded naming it; rank 2's late call
// returns the same error instead of waiting.
TEST(ThreadCommunicatorTest, MissingRankTimesOutWithStatus) {
  Comms c = MakeComms(3, absl::Milliseconds(100));
  std::vector<absl::Status> st(2);
  RunRanks(2, [&](int r) {
    std::vector<float> buf(8, 1.0f);
    st[r] = c[r]->AllReduceSum(buf.data(), buf.size());
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), absl::StatusCode::kDeadlineExceeded) << st[r];
    // "rank(s) 2", or "rank(s) 1, 2" if rank 1 started more than the timeout late.
    EXPECT_TRUE(absl::EndsWith(st[r].message(), "2")) << st[r];
    EXPECT_NE(st[r].message().find("for rank(s) "), std::string::npos) << st[r];
  }
  std::vector<float> buf(8, 1.0f);
  EXPECT_EQ(c[2]->AllReduceSum(buf.data(), buf.size()).code(),
            absl::StatusCode::kDeadlineExceeded);
}

// A rank that fails outside the collectives aborts the group: a peer blocked in a
// collective (with a long timeout) returns the reason at once.
TEST(ThreadCommunicatorTest, AbortReleasesBlockedPeers) {
  Comms c = MakeComms(2, absl::Minutes(10));
  absl::Status st;
  std::thread waiter([&] {
    std::vector<float> buf(8, 1.0f);
    st = c[0]->AllReduceSum(buf.data(), buf.size());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c[1]->Abort(absl::InternalError("forward failed"));
  waiter.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_NE(st.message().find("rank 1 aborted the group: forward failed"), std::string::npos)
      << st;
  EXPECT_EQ(c[1]->Barrier().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace loom
