// LoaderThread: one thread that runs adapter loads (disk I/O, parsing, validation) in
// submission order, so gRPC callback threads never block on them. Thread-safe.
#ifndef LOOM_SERVER_LOADER_THREAD_H_
#define LOOM_SERVER_LOADER_THREAD_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace loom {

class LoaderThread {
 public:
  LoaderThread();
  ~LoaderThread();  // Stop()
  LoaderThread(const LoaderThread&) = delete;
  LoaderThread& operator=(const LoaderThread&) = delete;

  // Queues `task`. After Stop() the task runs on the caller's thread instead.
  void Post(std::function<void()> task);
  // Runs the queued tasks, then joins. Idempotent.
  void Stop();

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace loom

#endif  // LOOM_SERVER_LOADER_THREAD_H_
