// The generated loom.v1 code compiles, links, and keeps field presence and oneof choice
// across the wire; service descriptors have the names and streaming shape clients use.
#include <string>

#include "gtest/gtest.h"
#include "google/protobuf/descriptor.h"
#include "proto/loom/v1/admin.grpc.pb.h"
#include "proto/loom/v1/inference.grpc.pb.h"

namespace loom::v1 {
namespace {

TEST(ProtoRoundTrip, GenerateRequestKeepsOneofAndPresence) {
  GenerateRequest req;
  req.set_adapter_id("adapter-3");
  auto* chat = req.mutable_chat();
  auto* m = chat->add_messages();
  m->set_role("user");
  m->set_content("Hi \xc3\xa9");
  req.mutable_sampling()->set_temperature(0.7f);
  req.mutable_sampling()->set_seed(0);  // seed 0 is a real seed: presence must survive
  req.add_stop("\n\n");
  req.set_max_tokens(32);
  req.set_top_logprobs(5);

  std::string wire;
  ASSERT_TRUE(req.SerializeToString(&wire));
  GenerateRequest back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.prompt_case(), GenerateRequest::kChat);
  EXPECT_EQ(back.chat().messages(0).content(), "Hi \xc3\xa9");
  EXPECT_TRUE(back.sampling().has_seed());
  EXPECT_EQ(back.sampling().seed(), 0u);
  EXPECT_FALSE(back.sampling().has_top_p());
  EXPECT_FALSE(back.sampling().has_repetition_penalty());
  EXPECT_FLOAT_EQ(back.sampling().temperature(), 0.7f);
  EXPECT_EQ(back.max_tokens(), 32);
  EXPECT_EQ(back.top_logprobs(), 5);
  EXPECT_EQ(back.SerializeAsString(), wire);

  // Setting another member of the oneof replaces the first.
  back.mutable_token_ids()->add_ids(42);
  EXPECT_EQ(back.prompt_case(), GenerateRequest::kTokenIds);
  EXPECT_FALSE(back.has_chat());
}

TEST(ProtoRoundTrip, AdapterInfoWithTimestamp) {
  ListAdaptersResponse resp;
  AdapterInfo* a = resp.add_adapters();
  a->set_id("x");
  a->set_state(ADAPTER_STATE_READY);
  a->add_targets("q_proj");
  a->set_bytes(uint64_t{1} << 40);
  a->mutable_last_use()->set_seconds(1700000000);
  ListAdaptersResponse back;
  ASSERT_TRUE(back.ParseFromString(resp.SerializeAsString()));
  ASSERT_EQ(back.adapters_size(), 1);
  EXPECT_EQ(back.adapters(0).bytes(), uint64_t{1} << 40);
  EXPECT_EQ(back.adapters(0).last_use().seconds(), 1700000000);
  EXPECT_EQ(AdapterState_Name(back.adapters(0).state()), "ADAPTER_STATE_READY");
}

TEST(ProtoRoundTrip, ServiceDescriptors) {
  const auto* inference = Inference::service_full_name();
  EXPECT_STREQ(inference, "loom.v1.Inference");
  EXPECT_STREQ(Admin::service_full_name(), "loom.v1.Admin");
  const auto* file = GenerateRequest::descriptor()->file();
  EXPECT_EQ(file->name(), "loom/v1/inference.proto");
  const auto* svc = file->FindServiceByName("Inference");
  ASSERT_NE(svc, nullptr);
  const auto* gen = svc->FindMethodByName("Generate");
  ASSERT_NE(gen, nullptr);
  EXPECT_FALSE(gen->client_streaming());
  EXPECT_TRUE(gen->server_streaming());
  EXPECT_NE(svc->FindMethodByName("Tokenize"), nullptr);
  EXPECT_NE(svc->FindMethodByName("ListModels"), nullptr);
  const auto* admin = AdapterInfo::descriptor()->file()->FindServiceByName("Admin");
  ASSERT_NE(admin, nullptr);
  for (const char* m : {"LoadAdapter", "UnloadAdapter", "ListAdapters", "GetStatus"}) {
    EXPECT_NE(admin->FindMethodByName(m), nullptr) << m;
  }
}

}  // namespace
}  // namespace loom::v1
