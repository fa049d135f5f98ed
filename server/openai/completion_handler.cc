#include "server/openai/completion_handler.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/openai/choice_streams.h"
#include "server/openai/openai_response.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(200);

// A streamed response in progress: the chunked content provider's state.
struct SseStream {
  ResponseContext ctx;
  std::shared_ptr<ChoiceStreams> streams;
  AdmissionTicket ticket;
  int n = 1;
  int prompt_tokens = 0;
  bool chat = false;
  bool started = false;
  std::vector<int64_t> text_bytes;      // per choice, for legacy text_offset
  std::vector<int> completion_tokens;   // per choice
  std::vector<ChoiceStreams::Item> pending;  // taken before the headers went out
  absl::Status error;
  bool ended = false;

  // The frames of one event (may be none).
  std::string Frames(const ChoiceStreams::Item& item) {
    const StreamEvent& e = item.event;
    std::string out;
    completion_tokens[item.index] = e.completion_tokens;
    if (!e.text.empty() || (!e.token_ids.empty() && ctx.logprobs)) {
      out += SseFrame(EventChunk(ctx, item.index, e, text_bytes[item.index]));
      for (int32_t t : e.token_ids) {
        absl::StatusOr<std::string_view> b = ctx.tokenizer->TokenBytes(t);
        text_bytes[item.index] += b.ok() ? static_cast<int64_t>(b->size()) : 0;
      }
    }
    if (e.finished && e.error.ok()) out += SseFrame(FinishChunk(ctx, item.index, e.finish_reason));
    if (e.finished && !e.error.ok() && error.ok()) {
      error = e.error;
      out += SseFrame(ErrorBody(e.error));
    }
    return out;
  }

  int TotalCompletion() const {
    int total = 0;
    for (int c : completion_tokens) total += c;
    return total;
  }

  // The stream's end: usage (when asked for), [DONE]; the tenant is charged.
  std::string Tail() {
    std::string out;
    if (ctx.include_usage && error.ok()) {
      out += SseFrame(UsageChunk(ctx, prompt_tokens, TotalCompletion()));
    }
    out += kSseDone;
    ticket.Finish(error.code(), prompt_tokens, TotalCompletion());
    ended = true;
    return out;
  }

  // One call of httplib's content provider: writes what is ready; false ends the
  // connection (a write failed: the client is gone).
  bool Provide(httplib::DataSink& sink) {
    std::string out;
    if (!started) {
      started = true;
      if (chat) {
        for (int i = 0; i < n; ++i) out += SseFrame(RoleChunk(ctx, i));
      }
      for (const ChoiceStreams::Item& item : pending) out += Frames(item);
      pending.clear();
    } else {
      ChoiceStreams::Item item;
      if (streams->Next(&item, kPoll)) out += Frames(item);
    }
    if (!error.ok()) streams->CancelAll();  // one choice failed: end the response
    const bool last = !error.ok() || streams->done();
    if (last) out += Tail();
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      streams->CancelAll();
      if (!ended) ticket.Finish(absl::StatusCode::kCancelled, prompt_tokens, TotalCompletion());
      ended = true;
      return false;
    }
    if (last) sink.done();
    return true;
  }
};

// Waits for every choice; the whole response or the first error.
void Whole(const ResponseContext& ctx, ChoiceStreams& streams, int n, int prompt_tokens,
           AdmissionTicket& ticket, httplib::Response& res) {
  std::vector<ChoiceResult> results(static_cast<size_t>(n));
  absl::Status error;
  while (!streams.done()) {
    ChoiceStreams::Item item;
    if (!streams.Next(&item, kPoll)) continue;
    results[item.index].Add(item.event);
    if (item.event.finished && !item.event.error.ok() && error.ok()) {
      error = item.event.error;
      streams.CancelAll();
    }
  }
  int completion = 0;
  for (const ChoiceResult& r : results) completion += r.completion_tokens;
  ticket.Finish(error.code(), prompt_tokens, completion);
  if (!error.ok()) return WriteError(error, res);
  res.status = 200;
  res.set_content(Dump(WholeResponse(ctx, results, prompt_tokens)), "application/json");
}

}  // namespace

void WriteError(const absl::Status& status, httplib::Response& res) {
  res.status = HttpStatusOf(status);
  if (std::optional<absl::Duration> retry = RetryAfter(status)) {
    res.set_header("Retry-After", absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(*retry))));
  }
  res.set_content(Dump(ErrorBody(status)), "application/json");
}

void HandleCompletion(const InferenceEdge& edge, OpenAiEndpoint endpoint,
                      const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(req.body, endpoint, edge.catalog().base_id());
  if (!parsed.ok()) return WriteError(parsed.status(), res);
  absl::StatusOr<PreparedRequest> prepared =
      edge.Prepare(req.get_header_value("Authorization"), parsed->request);
  if (!prepared.ok()) return WriteError(prepared.status(), res);
  const int prompt_tokens = static_cast<int>(prepared->request.prompt.size());
  absl::StatusOr<std::shared_ptr<ChoiceStreams>> streams =
      ChoiceStreams::Start(edge.frontend(), prepared->request, prepared->n);
  if (!streams.ok()) {
    prepared->ticket.Finish(streams.status().code(), prompt_tokens, 0);
    return WriteError(streams.status(), res);
  }
  const ResponseContext ctx = MakeResponseContext(*parsed, edge.model().tokenizer.get());
  if (!parsed->stream) {
    return Whole(ctx, **streams, prepared->n, prompt_tokens, prepared->ticket, res);
  }
  // Headers go out with the first event, so that a refusal found then (an unknown
  // adapter, a failed load) is still an HTTP error.
  auto sse = std::make_shared<SseStream>();
  sse->ctx = ctx;
  sse->streams = *streams;
  sse->ticket = std::move(prepared->ticket);
  sse->n = prepared->n;
  sse->prompt_tokens = prompt_tokens;
  sse->chat = endpoint == OpenAiEndpoint::kChatCompletions;
  sse->text_bytes.assign(static_cast<size_t>(sse->n), 0);
  sse->completion_tokens.assign(static_cast<size_t>(sse->n), 0);
  ChoiceStreams::Item first;
  while (!sse->streams->Next(&first, kPoll)) {
  }
  if (first.event.finished && !first.event.error.ok() && first.event.token_ids.empty()) {
    sse->streams->CancelAll();
    sse->ticket.Finish(first.event.error.code(), prompt_tokens, 0);
    return WriteError(first.event.error, res);
  }
  sse->pending.push_back(std::move(first));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [sse](size_t, httplib::DataSink& sink) { return sse->Provide(sink); },
      [sse](bool) {
        if (!sse->ended) {  // the connection ended before the stream did
          sse->streams->CancelAll();
          sse->ticket.Finish(absl::StatusCode::kCancelled, sse->prompt_tokens,
                             sse->TotalCompletion());
          sse->ended = true;
        }
      });
}

}  // namespace loom
