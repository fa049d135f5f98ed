#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace loom::kernels {
namespace {

TEST(ThreadPoolTest, SizeCountsTheCaller) {
  EXPECT_EQ(ThreadPool(1).size(), 1);
  EXPECT_EQ(ThreadPool(3).size(), 3);
  EXPECT_GE(ThreadPool(0).size(), 1);
}

TEST(ThreadPoolTest, EveryIndexOnceWithGrainAlignedChunks) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1000, 4097}) {
      for (int64_t grain : {1, 3, 16, 5000}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<bool> bad_chunk{false};
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
          if (b % grain != 0 || e != std::min(n, b + grain)) bad_chunk = true;
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        EXPECT_FALSE(bad_chunk) << threads << " " << n << " " << grain;
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
      }
    }
  }
}

TEST(ThreadPoolTest, ZeroAndNegativeWorkIsANoOp) {
  ThreadPool pool(2);
  int calls = 0;
  pool.ParallelFor(0, 4, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-5, 4, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// Many back-to-back jobs, some after idle gaps long enough for workers to block: every
// job must complete with every chunk run exactly once (no lost wake-ups, no stale jobs).
TEST(ThreadPoolTest, ManyJobsWithIdleGaps) {
  ThreadPool pool(3);
  for (int iter = 0; iter < 3000; ++iter) {
    if (iter % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic<int64_t> sum{0};
    const int64_t n = 1 + iter % 37;
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i + 1);
    });
    ASSERT_EQ(sum.load(), n * (n + 1) / 2) << iter;
  }
}

TEST(ThreadPoolTest, WorkersTakePart) {
  ThreadPool pool(2);
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool.ParallelFor(200, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_EQ(ids.size(), 2u);
}

}  // namespace
}  // namespace loom::kernels
