// GenerateReactor: one loom.v1.Inference/Generate call, in the single and the router role
// alike (the difference is the InferenceEdge's Frontend).
//
// Life: Start (parse the raw request, Prepare = validate, Frontend::Submit) -> events
// queued, one write in flight -> final event -> remaining writes -> Finish(status) ->
// OnDone deletes the reactor. The call's deadline becomes the request's; the call's
// cancellation, or a failed write (the client is gone), cancels it at the next step.
//
// Threads: gRPC callback threads (Start, OnWriteDone, OnCancel, OnDone) and the
// frontend's event thread meet in a shared State guarded by its mutex; the State
// outlives the reactor (the frontend's callback keeps it), so a late event after OnDone
// is harmless.
#ifndef LOOM_SERVER_GENERATE_REACTOR_H_
#define LOOM_SERVER_GENERATE_REACTOR_H_

#include <memory>

#include "grpcpp/grpcpp.h"
#include "server/inference_edge.h"

namespace loom {

// The call's "authorization" metadata ("Bearer KEY"), "" when absent.
std::string Authorization(const grpc::CallbackServerContext& ctx);

class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Starts the call; the reactor deletes itself in OnDone. `request` holds a serialized
  // loom.v1.GenerateRequest.
  GenerateReactor(const InferenceEdge* edge, grpc::CallbackServerContext* ctx,
                  const grpc::ByteBuffer* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct State;

  void Start(const InferenceEdge* edge, grpc::CallbackServerContext* ctx,
             const grpc::ByteBuffer* request);

  std::shared_ptr<State> state_;
};

}  // namespace loom

#endif  // LOOM_SERVER_GENERATE_REACTOR_H_
