// Every field of the Worker types survives the trip through loom.internal.v1 messages
// (and their wire encoding), and malformed peer messages are rejected.
#include "scheduler/cluster/worker_proto.h"

#include "gtest/gtest.h"

namespace loom {
namespace {

template <typename M>
M Reparsed(const M& m) {
  M out;
  EXPECT_TRUE(out.ParseFromString(m.SerializeAsString()));
  return out;
}

TEST(WorkerProtoTest, RequestRoundTripsEveryField) {
  WorkerRequest r;
  r.adapter_id = "tenant-7";
  r.context = {1, 2, 49151, 0};
  r.generated_before = 2;
  r.sampling.temperature = 0.7f;
  r.sampling.top_k = 40;
  r.sampling.top_p = 0.9f;
  r.sampling.min_p = 0.05f;
  r.sampling.repetition_penalty = 1.1f;
  r.sampling.frequency_penalty = -0.5f;
  r.sampling.presence_penalty = 0.25f;
  r.sampling.penalty_last_n = -1;
  r.sampling.seed = 0xfedcba9876543210ull;
  r.sampling.has_seed = true;
  r.max_new_tokens = 17;
  r.stop_at_end_of_generation = false;
  r.logprobs = true;
  r.top_logprobs = 5;
  const WorkerRequest back = FromProto(Reparsed(ToProto(r)));
  EXPECT_EQ(back.adapter_id, r.adapter_id);
  EXPECT_EQ(back.context, r.context);
  EXPECT_EQ(back.generated_before, r.generated_before);
  EXPECT_EQ(back.sampling.temperature, r.sampling.temperature);
  EXPECT_EQ(back.sampling.top_k, r.sampling.top_k);
  EXPECT_EQ(back.sampling.top_p, r.sampling.top_p);
  EXPECT_EQ(back.sampling.min_p, r.sampling.min_p);
  EXPECT_EQ(back.sampling.repetition_penalty, r.sampling.repetition_penalty);
  EXPECT_EQ(back.sampling.frequency_penalty, r.sampling.frequency_penalty);
  EXPECT_EQ(back.sampling.presence_penalty, r.sampling.presence_penalty);
  EXPECT_EQ(back.sampling.penalty_last_n, r.sampling.penalty_last_n);
  EXPECT_EQ(back.sampling.seed, r.sampling.seed);
  EXPECT_EQ(back.sampling.has_seed, r.sampling.has_seed);
  EXPECT_EQ(back.max_new_tokens, r.max_new_tokens);
  EXPECT_EQ(back.stop_at_end_of_generation, r.stop_at_end_of_generation);
  EXPECT_EQ(back.logprobs, r.logprobs);
  EXPECT_EQ(back.top_logprobs, r.top_logprobs);
  // Defaults survive too (greedy options are valid after the trip).
  EXPECT_TRUE(FromProto(Reparsed(ToProto(WorkerRequest()))).sampling.Validate().ok());
}

TEST(WorkerProtoTest, EventRoundTripsAndMalformedIsRejected) {
  WorkerEvent e;
  e.token_ids = {5, 6};
  e.logprobs = {-0.5f, -1.25f};
  e.top_logprobs = {{{5, -0.5f}, {9, -2.0f}}, {{6, -1.25f}, {3, -1.5f}}};
  e.finished = true;
  e.end_of_generation = true;
  absl::StatusOr<WorkerEvent> back = FromProto(Reparsed(ToProto(e)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->token_ids, e.token_ids);
  EXPECT_EQ(back->logprobs, e.logprobs);
  EXPECT_EQ(back->top_logprobs, e.top_logprobs);
  EXPECT_TRUE(back->finished);
  EXPECT_TRUE(back->end_of_generation);

  internal::v1::WorkerGenerateResponse bad = ToProto(e);
  bad.add_logprobs(-3.0f);
  EXPECT_EQ(FromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = ToProto(e);
  bad.mutable_top_logprobs(1)->add_token_ids(4);
  EXPECT_EQ(FromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = ToProto(e);
  bad.add_top_logprobs();
  EXPECT_EQ(FromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerProtoTest, LoadRoundTrips) {
  WorkerLoad l;
  l.running = 3;
  l.queued = 9;
  l.kv_pages_free = 100;
  l.kv_pages_total = 256;
  l.max_batch_size = 64;
  l.resident_adapters = {"a", "b"};
  l.steps = 1ull << 40;
  l.step_seconds_ewma = 0.0125;
  l.draining = true;
  const WorkerLoad back = FromProto(Reparsed(ToProto(l)));
  EXPECT_EQ(back.running, l.running);
  EXPECT_EQ(back.queued, l.queued);
  EXPECT_EQ(back.kv_pages_free, l.kv_pages_free);
  EXPECT_EQ(back.kv_pages_total, l.kv_pages_total);
  EXPECT_EQ(back.max_batch_size, l.max_batch_size);
  EXPECT_EQ(back.resident_adapters, l.resident_adapters);
  EXPECT_EQ(back.steps, l.steps);
  EXPECT_EQ(back.step_seconds_ewma, l.step_seconds_ewma);
  EXPECT_TRUE(back.draining);
}

}  // namespace
}  // namespace loom
