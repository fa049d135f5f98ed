// A fixed pool of worker threads for data-parallel kernels. The calling thread takes part.
#ifndef LOOM_KERNELS_CPU_THREAD_POOL_H_
#define LOOM_KERNELS_CPU_THREAD_POOL_H_

#include <cstdint>
#include <functional>

namespace loom::kernels {

class ThreadPool {
 public:
  // n_threads total (including the caller); 0 = all hardware threads.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;

  // Splits [0, n) into contiguous chunks of `grain` (the last may be shorter) and runs
  // fn(begin, end) on them over all threads; returns when every chunk is done.
  // Not reentrant: fn must not call ParallelFor on the same pool.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace loom::kernels

#endif  // LOOM_KERNELS_CPU_THREAD_POOL_H_
