#include "scheduler/router/router.h"

#include <vector>

#include "gtest/gtest.h"
#include "scheduler/router/punica_policy.h"

namespace loom {
namespace {

WorkerView Worker(int id, int running, int32_t free = 1000) {
  WorkerView w;
  w.id = id;
  w.running = running;
  w.kv_pages_free = free;
  w.kv_pages_total = 1000;
  return w;
}

PlacementRequest Req(uint64_t id, int context = 15) {
  PlacementRequest r;
  r.id = id;
  r.adapter_id = "a" + std::to_string(id);
  r.context_tokens = context;  // 15 + 1 tokens = 1 page
  r.max_new_tokens = 10;
  return r;
}

Router MakeRouter(size_t max_queued = 100) {
  PlacementOptions o;
  o.max_batch_size = 4;
  return Router(std::make_unique<PunicaPolicy>(o), RouterOptions{max_queued});
}

TEST(Router, PlacesAndUpdatesTheView) {
  Router router = MakeRouter();
  std::vector<WorkerView> ws = {Worker(0, 1), Worker(1, 2)};
  auto placed = router.Submit(Req(1), absl::MakeSpan(ws));
  ASSERT_TRUE(placed.ok());
  ASSERT_TRUE(placed->has_value());
  EXPECT_EQ(**placed, 1);
  EXPECT_EQ(ws[1].queued, 1);
  EXPECT_EQ(ws[1].kv_pages_free, 999);
  EXPECT_TRUE(ws[1].HasAdapter("a1"));
  // Worker 1 now has load 3 and still wins; then it is full (4) and worker 0 gets one.
  EXPECT_EQ(**router.Submit(Req(2), absl::MakeSpan(ws)), 1);
  EXPECT_EQ(**router.Submit(Req(3), absl::MakeSpan(ws)), 0);
}

TEST(Router, QueuesFcfsAndDrainsInOrderWithoutOvertaking) {
  Router router = MakeRouter();
  std::vector<WorkerView> ws = {Worker(0, 4), Worker(1, 4)};
  for (uint64_t id = 1; id <= 3; ++id) {
    auto placed = router.Submit(Req(id), absl::MakeSpan(ws));
    ASSERT_TRUE(placed.ok());
    EXPECT_FALSE(placed->has_value());
  }
  EXPECT_EQ(router.queued(), 3u);
  ws[1].running = 3;  // one slot frees
  // A new arrival does not overtake the queue even though a slot is free.
  EXPECT_FALSE(router.Submit(Req(4), absl::MakeSpan(ws))->has_value());
  std::vector<Assignment> a = router.DrainQueue(absl::MakeSpan(ws));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].request_id, 1u);
  EXPECT_EQ(a[0].worker_id, 1);
  EXPECT_TRUE(router.DrainQueue(absl::MakeSpan(ws)).empty());  // view now full
  ws[0].running = 1;  // three slots free on worker 0
  a = router.DrainQueue(absl::MakeSpan(ws));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].request_id, 2u);
  EXPECT_EQ(a[1].request_id, 3u);
  EXPECT_EQ(a[2].request_id, 4u);
  EXPECT_EQ(router.queued(), 0u);
}

TEST(Router, HeadOfLineBlocksStrictly) {
  Router router = MakeRouter();
  std::vector<WorkerView> ws = {Worker(0, 4, 10)};
  ASSERT_FALSE(router.Submit(Req(1, 500), absl::MakeSpan(ws))->has_value());  // full
  ASSERT_FALSE(router.Submit(Req(2), absl::MakeSpan(ws))->has_value());
  ws[0].running = 0;  // room for 4, but request 1 needs 32 pages and only 10 are free
  EXPECT_TRUE(router.DrainQueue(absl::MakeSpan(ws)).empty());
  EXPECT_EQ(router.queued(), 2u);
  ASSERT_TRUE(router.CancelQueued(1));
  EXPECT_FALSE(router.CancelQueued(1));
  std::vector<Assignment> a = router.DrainQueue(absl::MakeSpan(ws));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].request_id, 2u);
}

TEST(Router, RequeueGoesToTheFront) {
  Router router = MakeRouter();
  std::vector<WorkerView> ws = {Worker(0, 4)};
  ASSERT_FALSE(router.Submit(Req(1), absl::MakeSpan(ws))->has_value());
  router.Requeue(Req(9));
  ws[0].running = 3;
  std::vector<Assignment> a = router.DrainQueue(absl::MakeSpan(ws));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].request_id, 9u);
}

TEST(Router, RejectsBadRequestsAndAFullQueue) {
  Router router = MakeRouter(/*max_queued=*/1);
  std::vector<WorkerView> ws = {Worker(0, 4)};
  EXPECT_EQ(router.Submit(Req(1, 0), absl::MakeSpan(ws)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(router.Submit(Req(2), absl::MakeSpan(ws)).ok());
  EXPECT_EQ(router.Submit(Req(3), absl::MakeSpan(ws)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(router.queued(), 1u);
}

TEST(ScaleSignals, ReportsIdleWorkersAfterGraceOnlyWhenNothingWaits) {
  std::vector<WorkerView> ws = {Worker(0, 3), Worker(1, 0), Worker(2, 0), Worker(3, 0)};
  ws[1].idle_since_us = 100;
  ws[2].idle_since_us = 900;
  ws[3].idle_since_us = 0;
  ws[3].draining = true;  // being drained: the drain path releases it, not the autoscaler
  ScaleSignals s = ComputeScaleSignals(ws, 0, /*now_us=*/1000, /*idle_grace_us=*/500);
  EXPECT_EQ(s.idle_workers, std::vector<int>{1});
  EXPECT_FALSE(s.want_more);
  s = ComputeScaleSignals(ws, 2, 1000, 500);
  EXPECT_TRUE(s.idle_workers.empty());
  EXPECT_FALSE(s.want_more);  // idle workers exist (the queue head must be too big)
  ws[1].idle_since_us = ws[2].idle_since_us = -1;
  ws[1].running = ws[2].running = 4;
  s = ComputeScaleSignals(ws, 2, 1000, 500);
  EXPECT_TRUE(s.want_more);
  EXPECT_EQ(s.queued, 2u);
}

}  // namespace
}  // namespace loom
