// The write side of a gRPC server-streaming callback reactor, shared by loom.v1 Generate
// (single role and router role) and loom.internal.v1.Worker/Generate: messages are queued
// from any thread, exactly one write is in flight, and once the final status is set and
// every queued message is written (or a write failed) the reactor is handed back once to
// be finished.
//
// Not thread-safe by itself: every call is made under the owning call state's mutex.
#ifndef LOOM_SERVER_STREAM_WRITER_H_
#define LOOM_SERVER_STREAM_WRITER_H_

#include <deque>
#include <utility>

#include "grpcpp/grpcpp.h"

namespace loom {

template <typename Message>
class StreamWriter {
 public:
  using Reactor = grpc::ServerWriteReactor<Message>;

  // Writes start only once the reactor is attached (after its constructor ran).
  void Attach(Reactor* reactor) { reactor_ = reactor; }

  void Push(Message m) { queue_.push_back(std::move(m)); }

  // Sets the call's final status; false (and ignored) if one was already set.
  bool SetFinal(grpc::Status status) {
    if (final_seen_) return false;
    final_seen_ = true;
    status_ = std::move(status);
    return true;
  }
  bool final_seen() const { return final_seen_; }
  bool write_failed() const { return write_failed_; }
  const grpc::Status& status() const { return status_; }

  // From OnWriteDone. True the first time a write fails (the client is gone): queued
  // messages are dropped from then on; the caller should cancel the work behind the call.
  bool WriteDone(bool ok) {
    writing_ = false;
    if (ok || write_failed_) return false;
    write_failed_ = true;
    return true;
  }

  // Starts the next write. Returns the reactor, detached, exactly once: when the final
  // status is set and nothing is left to write; the caller then calls Finish(status())
  // on it (after recording what it records). nullptr otherwise.
  Reactor* Pump() {
    if (writing_ || finished_ || reactor_ == nullptr) return nullptr;
    if (write_failed_) queue_.clear();
    if (!queue_.empty()) {
      in_flight_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      reactor_->StartWrite(&in_flight_);
      return nullptr;
    }
    if (!final_seen_) return nullptr;
    finished_ = true;
    Reactor* r = reactor_;
    reactor_ = nullptr;
    return r;
  }

 private:
  Reactor* reactor_ = nullptr;  // valid until handed back by Pump
  std::deque<Message> queue_;
  Message in_flight_;           // the message being written
  bool writing_ = false;
  bool write_failed_ = false;
  bool final_seen_ = false;
  bool finished_ = false;       // the reactor was handed back
  grpc::Status status_;
};

}  // namespace loom

#endif  // LOOM_SERVER_STREAM_WRITER_H_
