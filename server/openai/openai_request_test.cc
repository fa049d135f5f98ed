// OpenAI request bodies -> the edge's InferenceRequest: every supported field lands where
// it should (chat and legacy shapes), and a body of the wrong shape is refused naming the
// field; parameters Loom does not implement are refused, not ignored.
#include "server/openai/openai_request.h"

#include "gtest/gtest.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

constexpr char kBase[] = "SmolLM2-135M-Instruct";

absl::StatusOr<OpenAiRequest> Chat(const std::string& body) {
  return ParseOpenAiRequest(body, OpenAiEndpoint::kChatCompletions, kBase);
}
absl::StatusOr<OpenAiRequest> Completion(const std::string& body) {
  return ParseOpenAiRequest(body, OpenAiEndpoint::kCompletions, kBase);
}

void ExpectRefused(const absl::StatusOr<OpenAiRequest>& r, const std::string& param) {
  ASSERT_FALSE(r.ok()) << "accepted; expected a refusal naming " << param;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(ErrorParam(r.status()), param) << r.status();
}

TEST(OpenAiRequestTest, ChatBodyWithEveryParameter) {
  absl::StatusOr<OpenAiRequest> r = Chat(R"({
    "model": "tenant-a", "messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
    "max_completion_tokens": 12, "temperature": 0.5, "top_p": 0.9, "stop": ["\n", "END"],
    "seed": 7, "frequency_penalty": 0.1, "presence_penalty": 0.2, "logprobs": true,
    "top_logprobs": 3, "n": 2, "user": "u-1", "top_k": 40, "min_p": 0.05,
    "repetition_penalty": 1.1, "ignore_eos": true, "stream": true,
    "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r.ok()) << r.status();
  const InferenceRequest& q = r->request;
  EXPECT_EQ(r->model, "tenant-a");
  EXPECT_EQ(q.adapter_id, "tenant-a");
  ASSERT_EQ(q.prompt.kind, PromptInput::Kind::kChat);
  ASSERT_EQ(q.prompt.chat.size(), 2u);
  EXPECT_EQ(q.prompt.chat[1].content, "Hi there");
  EXPECT_EQ(q.prompt.field, "messages");
  EXPECT_EQ(*q.max_tokens, 12);
  EXPECT_FLOAT_EQ(q.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(q.sampling.top_p, 0.9f);
  EXPECT_EQ(q.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(q.sampling.has_seed);
  EXPECT_EQ(q.sampling.seed, 7u);
  EXPECT_FLOAT_EQ(q.sampling.frequency_penalty, 0.1f);
  EXPECT_FLOAT_EQ(q.sampling.presence_penalty, 0.2f);
  EXPECT_TRUE(q.logprobs);
  EXPECT_EQ(q.top_logprobs, 3);
  EXPECT_EQ(q.n, 2);
  EXPECT_EQ(q.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(q.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(q.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(q.ignore_eos);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(OpenAiRequestTest, CompletionsPromptsAndLegacyLogprobs) {
  absl::StatusOr<OpenAiRequest> r =
      Completion(R"({"model": "SmolLM2-135M-Instruct", "prompt": "Once", "max_tokens": 5,
                     "logprobs": 2, "stop": "\n", "top_k": -1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->request.adapter_id, "");  // the base model's id: no adapter
  EXPECT_EQ(r->request.prompt.text, "Once");
  EXPECT_EQ(r->legacy_logprobs, 2);
  EXPECT_TRUE(r->request.logprobs);
  EXPECT_EQ(r->request.top_logprobs, 2);
  EXPECT_EQ(r->request.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r->request.sampling.top_k, 0);  // vLLM's -1 = off
  EXPECT_FALSE(r->request.max_tokens.has_value() && *r->request.max_tokens != 5);
  r = Completion(R"({"model": "m", "prompt": ["one string"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->request.prompt.text, "one string");
  r = Completion(R"({"model": "m", "prompt": [1, 2, 3]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->request.prompt.kind, PromptInput::Kind::kTokenIds);
  EXPECT_EQ(r->request.prompt.token_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(r->request.max_tokens.has_value());  // the server's default applies
}

TEST(OpenAiRequestTest, WrongShapesAreRefusedByField) {
  ExpectRefused(Chat("not json"), "");
  ExpectRefused(Chat("[1]"), "");
  ExpectRefused(Chat(R"({"messages": []})"), "model");
  ExpectRefused(Chat(R"({"model": 3, "messages": []})"), "model");
  ExpectRefused(Chat(R"({"model": "m"})"), "messages");
  ExpectRefused(Chat(R"({"model": "m", "messages": [{"content": "x"}]})"), "messages");
  ExpectRefused(Chat(R"({"model": "m", "messages": [{"role": "user", "content": 5}]})"),
                "messages");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "temperature": "hot"})"), "temperature");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "temperature": 1e300})"), "temperature");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "max_tokens": 0})"), "max_tokens");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "max_tokens": 1.5})"), "max_tokens");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "n": "2"})"), "n");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "stop": [1]})"), "stop");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "seed": 1e3})"), "seed");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "logprobs": 1})"), "logprobs");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "top_logprobs": 2})"), "top_logprobs");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "stream_options": {}})"),
                "stream_options");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "user": 1})"), "user");
  ExpectRefused(Completion(R"({"model": "m"})"), "prompt");
  ExpectRefused(Completion(R"({"model": "m", "prompt": ["a", "b"]})"), "prompt");
  ExpectRefused(Completion(R"({"model": "m", "prompt": "x", "logprobs": -1})"), "logprobs");
  ExpectRefused(Chat(std::string(R"({"model": "m", "messages": [], "x": )") +
                     std::string(100, '[') + std::string(100, ']') + "}"),
                "");
}

TEST(OpenAiRequestTest, UnimplementedParametersAreRefusedNotIgnored) {
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "tools": [{"type": "function"}]})"),
                "tools");
  ExpectRefused(Chat(R"({"model": "m", "messages": [],
                         "response_format": {"type": "json_object"}})"),
                "response_format");
  ExpectRefused(Chat(R"({"model": "m", "messages": [], "logit_bias": {"5": 10}})"),
                "logit_bias");
  ExpectRefused(Completion(R"({"model": "m", "prompt": "x", "echo": true})"), "echo");
  ExpectRefused(Completion(R"({"model": "m", "prompt": "x", "best_of": 3})"), "best_of");
  EXPECT_TRUE(Chat(R"({"model": "m", "messages": [], "response_format": {"type": "text"},
                       "logit_bias": {}, "tools": null})")
                  .ok());
}

}  // namespace
}  // namespace loom
