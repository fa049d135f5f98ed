// POST /v1/completions and /v1/chat/completions: parse the body (openai_request.h), pass
// the edge (InferenceEdge::Prepare: admission, validation), run the n choices
// (choice_streams.h) and answer whole or as server-sent events (openai_response.h).
// Runs on the HTTP server's connection thread; a streamed response's frames are written
// by httplib's chunked content provider on that same thread.
#ifndef LOOM_SERVER_OPENAI_COMPLETION_HANDLER_H_
#define LOOM_SERVER_OPENAI_COMPLETION_HANDLER_H_

#include "absl/status/status.h"
#include "httplib.h"
#include "server/inference_edge.h"
#include "server/openai/openai_request.h"

namespace loom {

void HandleCompletion(const InferenceEdge& edge, OpenAiEndpoint endpoint,
                      const httplib::Request& req, httplib::Response& res);

// An OpenAI error response for `status` (HttpStatusOf, ErrorBody; Retry-After when the
// status carries a retry delay).
void WriteError(const absl::Status& status, httplib::Response& res);

}  // namespace loom

#endif  // LOOM_SERVER_OPENAI_COMPLETION_HANDLER_H_
