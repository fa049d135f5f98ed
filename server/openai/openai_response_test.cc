// The OpenAI objects built from StreamEvents, checked field by field against OpenAI's
// documented shapes (chat and legacy logprobs, chunks, usage, models, errors).
#include "server/openai/openai_response.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "models/tokenizer/test_vocab.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

using nlohmann::json;

class OpenAiResponseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = *Tokenizer::Create(testing::ByteLevelVocab({"<s>", "</s>"}, {}));
  }
  ResponseContext Context(OpenAiEndpoint endpoint, bool logprobs, int top) {
    OpenAiRequest r;
    r.endpoint = endpoint;
    r.model = "tenant-a";
    r.request.logprobs = logprobs;
    r.request.top_logprobs = top;
    return MakeResponseContext(r, tokenizer_.get());
  }
  int32_t Id(char c) const { return 2 + static_cast<unsigned char>(c); }  // byte token

  // "hi": two tokens with logprobs and two alternatives each, then finished.
  StreamEvent Event() const {
    StreamEvent e;
    e.text = "hi";
    e.token_ids = {Id('h'), Id('i')};
    e.token_logprobs = {-0.5f, -0.25f};
    e.top_logprobs = {{{Id('h'), -0.5f}, {Id('x'), -1.5f}}, {{Id('i'), -0.25f}, {Id('y'), -2.f}}};
    e.finished = true;
    e.finish_reason = FinishReason::kLength;
    e.prompt_tokens = 4;
    e.completion_tokens = 2;
    return e;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(OpenAiResponseTest, ChatCompletionWithLogprobs) {
  const ResponseContext ctx = Context(OpenAiEndpoint::kChatCompletions, true, 2);
  EXPECT_TRUE(absl::StartsWith(ctx.id, "chatcmpl-"));
  ChoiceResult c;
  c.Add(Event());
  const json j = WholeResponse(ctx, {c, c}, 4);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "tenant-a");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const json& lp = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 2u);
  EXPECT_EQ(lp[0]["token"], "h");
  EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(lp[0]["bytes"], json::array({'h'}));
  ASSERT_EQ(lp[1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(lp[1]["top_logprobs"][1]["token"], "y");
  EXPECT_EQ(j["usage"], (json{{"prompt_tokens", 4}, {"completion_tokens", 4},
                              {"total_tokens", 8}}));  // the prompt counts once
}

TEST_F(OpenAiResponseTest, LegacyCompletionLogprobsAreParallelArrays) {
  const ResponseContext ctx = Context(OpenAiEndpoint::kCompletions, true, 2);
  ChoiceResult c;
  c.Add(Event());
  const json j = WholeResponse(ctx, {c}, 4);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "hi");
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"h", "i"}));
  EXPECT_EQ(lp["text_offset"], json::array({0, 1}));
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -0.25f);
  EXPECT_FLOAT_EQ(lp["top_logprobs"][0]["x"].get<float>(), -1.5f);
  // Without logprobs asked for, the field is null.
  const json plain = WholeResponse(Context(OpenAiEndpoint::kCompletions, false, 0), {c}, 4);
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST_F(OpenAiResponseTest, StreamChunksAndFrames) {
  ResponseContext ctx = Context(OpenAiEndpoint::kChatCompletions, false, 0);
  ctx.include_usage = true;
  const json role = RoleChunk(ctx, 0);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(role.contains("usage") && role["usage"].is_null());
  const json text = EventChunk(ctx, 1, Event(), 0);
  EXPECT_EQ(text["choices"][0]["index"], 1);
  EXPECT_EQ(text["choices"][0]["delta"]["content"], "hi");
  const json fin = FinishChunk(ctx, 0, FinishReason::kStop);
  EXPECT_EQ(fin["choices"][0]["delta"], json::object());
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  const json usage = UsageChunk(ctx, 3, 5);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 8);
  const std::string frame = SseFrame(fin);
  EXPECT_TRUE(absl::StartsWith(frame, "data: {"));
  EXPECT_TRUE(absl::EndsWith(frame, "}\n\n"));
  EXPECT_EQ(frame.find('\n'), frame.size() - 2);  // one line of JSON
  EXPECT_EQ(json::parse(frame.substr(6)), fin);
  ctx.endpoint = OpenAiEndpoint::kCompletions;
  EXPECT_EQ(EventChunk(ctx, 0, Event(), 0)["choices"][0]["text"], "hi");
}

TEST_F(OpenAiResponseTest, ErrorsHaveOpenAisShapeAndStatus) {
  const absl::Status bad = WithParam(absl::InvalidArgumentError("temperature = 300 ..."),
                                     "temperature");
  EXPECT_EQ(HttpStatusOf(bad), 400);
  EXPECT_EQ(ErrorBody(bad),
            (json{{"error", {{"message", "temperature = 300 ..."},
                             {"type", "invalid_request_error"},
                             {"param", "temperature"},
                             {"code", nullptr}}}}));
  const json nf = ErrorBody(absl::NotFoundError("adapter 'x' not found"));
  EXPECT_EQ(nf["error"]["code"], "model_not_found");
  EXPECT_EQ(nf["error"]["param"], "model");
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusOf(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpStatusOf(absl::PermissionDeniedError("x")), 403);
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("x")), 503);
  // A hostile echoed name cannot break the JSON or grow it without bound.
  const std::string dumped = Dump(ErrorBody(absl::NotFoundError(std::string(5000, '\xff'))));
  EXPECT_LT(dumped.size(), 5000u);
  EXPECT_FALSE(json::parse(dumped, nullptr, false).is_discarded());
}

TEST_F(OpenAiResponseTest, ModelListIsVllmsShape) {
  const json j = ModelList({{"base", "", 2048, 0, true}, {"tenant-a", "base", 2048, 16, true}},
                           1700000000);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][0]["id"], "base");
  EXPECT_TRUE(j["data"][0]["parent"].is_null());
  EXPECT_EQ(j["data"][1]["parent"], "base");
  EXPECT_EQ(j["data"][1]["object"], "model");
  EXPECT_EQ(j["data"][1]["max_model_len"], 2048);
}

}  // namespace
}  // namespace loom
