#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOOM_CPU_RELAX() _mm_pause()
#else
#define LOOM_CPU_RELAX() ((void)0)
#endif

namespace loom::kernels {
namespace {
// Iterations a worker spins (with a pause) on the job counter before it blocks on the
// condition variable. ~4096 pauses is a few tens of microseconds: long enough to bridge
// the gap between the back-to-back ParallelFor calls of a decode step, short enough not
// to burn a core when the pool is idle.
constexpr int kSpinIterations = 4096;
}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;

  // Serialises concurrent callers (the pool runs one job at a time).
  std::mutex call_mu;

  // Wake-up machinery. `generation` changes once per job; workers spin on it, then sleep.
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};

  // The current job. Written by the caller before `generation` is bumped.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t grain = 1;
  int64_t n_chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  // Join protocol: a worker increments `joined`, then runs chunks only if the job is not
  // `closed`. The caller closes the job once it finds no chunk left and waits only for the
  // workers that joined, so a worker that is descheduled or slow to wake never delays it.
  std::atomic<int> joined{0};
  std::atomic<bool> closed{true};

  void RunChunks() {
    for (;;) {
      const int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= n_chunks) return;
      const int64_t begin = c * grain;
      const int64_t end = begin + grain < n ? begin + grain : n;
      (*fn)(begin, end);
    }
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    for (;;) {
      uint64_t g = generation.load(std::memory_order_acquire);
      for (int i = 0; g == seen && i < kSpinIterations; ++i) {
        LOOM_CPU_RELAX();
        g = generation.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> lock(mu);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        cv.wait(lock, [&] {
          return generation.load(std::memory_order_seq_cst) != seen ||
                 stop.load(std::memory_order_seq_cst);
        });
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        g = generation.load(std::memory_order_acquire);
      }
      if (stop.load(std::memory_order_acquire)) return;
      seen = g;
      joined.fetch_add(1, std::memory_order_seq_cst);
      if (!closed.load(std::memory_order_seq_cst)) RunChunks();
      joined.fetch_sub(1, std::memory_order_release);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  if (n_threads <= 0) {
    n_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (n_threads <= 0) n_threads = 1;
  }
  impl_->n_threads = n_threads;
  impl_->workers.reserve(n_threads - 1);
  for (int i = 1; i < n_threads; ++i) {
    impl_->workers.emplace_back([this] { impl_->WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop.store(true, std::memory_order_seq_cst);
    impl_->generation.fetch_add(1, std::memory_order_seq_cst);
  }
  impl_->cv.notify_all();
  for (std::thread& t : impl_->workers) t.join();
  delete impl_;
}

int ThreadPool::size() const { return impl_->n_threads; }

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t n_chunks = (n + grain - 1) / grain;
  if (n_chunks == 1 || impl_->workers.empty()) {
    for (int64_t b = 0; b < n; b += grain) fn(b, b + grain < n ? b + grain : n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(impl_->call_mu);
  Impl& s = *impl_;
  s.fn = &fn;
  s.n = n;
  s.grain = grain;
  s.n_chunks = n_chunks;
  s.next_chunk.store(0, std::memory_order_relaxed);
  s.closed.store(false, std::memory_order_seq_cst);  // publishes the job fields
  // seq_cst store/load pair with the worker's sleepers increment / generation check:
  // either the worker sees the new generation or we see it asleep and notify it.
  s.generation.fetch_add(1, std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(s.mu); }
    s.cv.notify_all();
  }
  s.RunChunks();
  s.closed.store(true, std::memory_order_seq_cst);
  while (s.joined.load(std::memory_order_seq_cst) != 0) LOOM_CPU_RELAX();
  s.fn = nullptr;
}

}  // namespace loom::kernels
