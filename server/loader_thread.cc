#include "server/loader_thread.h"

namespace loom {

LoaderThread::LoaderThread() : thread_([this] { Loop(); }) {}

LoaderThread::~LoaderThread() { Stop(); }

void LoaderThread::Post(std::function<void()> task) {
  {
    absl::MutexLock l(&mu_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      return;
    }
  }
  task();
}

void LoaderThread::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void LoaderThread::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !tasks_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace loom
