// The edge's one validation over a byte-level test vocabulary with ChatML markers: each
// field's refusal names the field (message and param payload); what passes arrives
// unchanged in the FrontendRequest, with the prompt tokenized or templated.
#include "server/request_validation.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/tokenizer/test_vocab.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

class RequestValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_.vocab = testing::ByteLevelVocab({"<s>", "</s>", "<|im_start|>", "<|im_end|>"}, {});
    model_.vocab.add_bos = false;
    model_.name = "test-model";
    model_.tokenizer = *Tokenizer::Create(model_.vocab);
    absl::StatusOr<ChatTemplate> chat = ChatTemplate::ChatML(*model_.tokenizer, model_.vocab);
    ASSERT_TRUE(chat.ok()) << chat.status();
    model_.chat.emplace(*std::move(chat));
    limits_.max_context = 64;
  }

  static InferenceRequest Text(const std::string& text) {
    InferenceRequest r;
    r.prompt.kind = PromptInput::Kind::kText;
    r.prompt.text = text;
    return r;
  }

  // Expects InvalidArgument whose message contains `in_message` and whose param is
  // `param`.
  void ExpectRefused(const InferenceRequest& r, const std::string& param,
                     const std::string& in_message) {
    absl::StatusOr<FrontendRequest> v = ValidateRequest(r, model_, limits_);
    ASSERT_FALSE(v.ok()) << "accepted; expected a refusal naming " << param;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << v.status();
    EXPECT_EQ(ErrorParam(v.status()), param) << v.status();
    EXPECT_NE(v.status().message().find(in_message), std::string::npos) << v.status();
  }

  ServingModel model_;
  RequestLimits limits_;
};

TEST_F(RequestValidationTest, AValidRequestArrivesWhole) {
  InferenceRequest r = Text("hello");
  r.adapter_id = "tenant-a";
  r.sampling.temperature = 0.7f;
  r.sampling.seed = 9;
  r.sampling.has_seed = true;
  r.stop = {"\n\n", "END"};
  r.max_tokens = 20;
  r.top_logprobs = 3;
  absl::StatusOr<FrontendRequest> v = ValidateRequest(r, model_, limits_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->adapter_id, "tenant-a");
  EXPECT_EQ(v->prompt, *model_.tokenizer->Encode("hello", false));
  EXPECT_EQ(v->sampling.temperature, 0.7f);
  EXPECT_EQ(v->sampling.seed, 9u);
  EXPECT_EQ(v->stop_strings, r.stop);
  EXPECT_EQ(v->max_tokens, 20);
  EXPECT_EQ(v->top_logprobs, 3);
  EXPECT_TRUE(v->logprobs);  // implied by top_logprobs
  EXPECT_TRUE(v->stop_at_end_of_generation);
  r.ignore_eos = true;
  EXPECT_FALSE(ValidateRequest(r, model_, limits_)->stop_at_end_of_generation);
}

TEST_F(RequestValidationTest, PromptFormsAreTokenizedOrTemplated) {
  InferenceRequest chat;
  chat.prompt.kind = PromptInput::Kind::kChat;
  chat.prompt.chat = {{"user", "hi"}};
  chat.max_tokens = 4;
  absl::StatusOr<FrontendRequest> v = ValidateRequest(chat, model_, limits_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->prompt, *model_.chat->Render(chat.prompt.chat, true));
  InferenceRequest ids;
  ids.prompt.kind = PromptInput::Kind::kTokenIds;
  ids.prompt.token_ids = {5, 6, 7};
  ids.max_tokens = 4;
  EXPECT_EQ(ValidateRequest(ids, model_, limits_)->prompt, (std::vector<int32_t>{5, 6, 7}));
  // The default max_tokens is capped to what fits after the prompt.
  limits_.default_max_tokens = 1000;
  EXPECT_EQ(ValidateRequest(Text("abcd"), model_, limits_)->max_tokens, 60);
}

TEST_F(RequestValidationTest, EveryFieldIsRefusedByName) {
  InferenceRequest none;
  ExpectRefused(none, "prompt", "prompt");
  ExpectRefused(Text(""), "prompt", "empty");
  ExpectRefused(Text("ab\xff"), "prompt", "UTF-8");
  InferenceRequest bad_id;
  bad_id.prompt.kind = PromptInput::Kind::kTokenIds;
  bad_id.prompt.field = "token_ids.ids";
  bad_id.prompt.token_ids = {3, model_.tokenizer->vocab_size()};
  ExpectRefused(bad_id, "token_ids.ids", "vocabulary");
  InferenceRequest chat;
  chat.prompt.kind = PromptInput::Kind::kChat;
  chat.prompt.field = "messages";
  chat.prompt.chat = {{"wizard", "hi"}};
  ExpectRefused(chat, "messages", "wizard");
  chat.prompt.chat.clear();
  ExpectRefused(chat, "messages", "empty");

  InferenceRequest r = Text("hello");
  r.sampling.temperature = -1;
  ExpectRefused(r, "temperature", "temperature");
  r = Text("hello");
  r.sampling.top_p = 1.5f;
  ExpectRefused(r, "top_p", "top_p");
  r = Text("hello");
  r.sampling.presence_penalty = std::numeric_limits<float>::infinity();
  ExpectRefused(r, "presence_penalty", "presence_penalty");
  r = Text("hello");
  r.max_tokens = 0;
  ExpectRefused(r, "max_tokens", "max_tokens = 0");
  r.max_tokens = 62;  // 5 prompt tokens + 62 > 64: both numbers named
  ExpectRefused(r, "max_tokens", "5 tokens) + max_tokens (62)");
  r.max_tokens = 2;
  r.top_logprobs = 21;
  ExpectRefused(r, "top_logprobs", "[0, 20]");
  r.top_logprobs = 0;
  r.n = 0;
  ExpectRefused(r, "n", "n = 0");
  r.n = 1;
  r.stop = {"ok", ""};
  ExpectRefused(r, "stop", "stop[1] is empty");
  r.stop = {"\xc3"};
  ExpectRefused(r, "stop", "UTF-8");
}

TEST_F(RequestValidationTest, LimitsAreAppliedAndNamed) {
  limits_.max_prompt_bytes = 8;
  ExpectRefused(Text("123456789"), "prompt", "at most 8");
  limits_.max_prompt_bytes = 1 << 20;
  limits_.max_prompt_tokens = 3;
  ExpectRefused(Text("abcd"), "prompt", "at most 3");
  limits_.max_prompt_tokens = 0;
  limits_.max_new_tokens = 10;
  InferenceRequest r = Text("hi");
  r.max_tokens = 11;
  ExpectRefused(r, "max_tokens", "limit of 10");
  r.max_tokens = 10;
  EXPECT_TRUE(ValidateRequest(r, model_, limits_).ok());
  limits_.max_stop_strings = 2;
  r.stop = {"a", "b", "c"};
  ExpectRefused(r, "stop", "at most 2");
  limits_.max_stop_string_bytes = 3;
  r.stop = {"abcd"};
  ExpectRefused(r, "stop", "at most 3");
  r.stop.clear();
  limits_.max_top_logprobs = 5;
  r.top_logprobs = 6;
  ExpectRefused(r, "top_logprobs", "[0, 5]");
  r.top_logprobs = 0;
  limits_.max_n = 2;
  r.n = 3;
  ExpectRefused(r, "n", "[1, 2]");
}

}  // namespace
}  // namespace loom
