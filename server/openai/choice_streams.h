// ChoiceStreams: the n streams of one OpenAI request (n choices of one prompt), run on a
// Frontend and handed to the HTTP handler's thread in arrival order. Choice i runs the
// request with seed + i when it is seeded (distinct sampler streams; greedy choices are
// alike, as with OpenAI), unseeded ones each draw their own seed.
//
// Threads: Start, Next and CancelAll from the handler's thread; the frontend's callbacks
// from its threads. The callbacks keep the object alive until every stream has ended, so
// a handler that gives up on it must CancelAll.
#ifndef LOOM_SERVER_OPENAI_CHOICE_STREAMS_H_
#define LOOM_SERVER_OPENAI_CHOICE_STREAMS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/frontend/frontend.h"

namespace loom {

class ChoiceStreams : public std::enable_shared_from_this<ChoiceStreams> {
 public:
  struct Item {
    int index = 0;  // the choice
    StreamEvent event;
  };

  // Submits the n streams; a refusal of any Submit cancels those already started and is
  // returned. `frontend` must outlive the object.
  static absl::StatusOr<std::shared_ptr<ChoiceStreams>> Start(Frontend* frontend,
                                                              const FrontendRequest& request,
                                                              int n);

  // The next event, waiting up to `timeout`; false when none came (or all are done and
  // delivered: see done()).
  bool Next(Item* item, absl::Duration timeout);
  // Every stream finished and every event was taken by Next.
  bool done() const;
  // Ends every unfinished stream at its next step.
  void CancelAll();

 private:
  ChoiceStreams(Frontend* frontend, int n) : frontend_(frontend), n_(n) {}
  void OnEvent(int index, const StreamEvent& event);

  Frontend* const frontend_;
  const int n_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> ids_ ABSL_GUARDED_BY(mu_);
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> is_finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom

#endif  // LOOM_SERVER_OPENAI_CHOICE_STREAMS_H_
