#include "scheduler/router/migration_planner.h"

#include <vector>

#include "gtest/gtest.h"
#include "scheduler/router/least_loaded_policy.h"

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

RunningRequest Running(uint64_t id, int worker, uint64_t seq, int context = 31) {
  RunningRequest r;
  r.request.id = id;
  r.request.adapter_id = "a";
  r.request.context_tokens = context;  // 31 + 1 tokens = 2 pages on re-add
  r.request.max_new_tokens = 5;
  r.worker_id = worker;
  r.kv_pages = 2;
  r.admission_seq = seq;
  return r;
}

PlacementOptions Options(int max_batch) {
  PlacementOptions o;
  o.max_batch_size = max_batch;
  o.kv_migrate_free_fraction = 0.0;
  return o;
}

TEST(PlanDrain, MovesEverythingOldestFirstAndRequeuesWhatDoesNotFit) {
  PlacementOptions o = Options(4);
  LeastLoadedPolicy policy(o);
  std::vector<WorkerView> ws = {Worker(0, 3), Worker(1, 2), Worker(2, 3)};
  ws[0].draining = true;
  std::vector<RunningRequest> running = {Running(7, 0, 30), Running(5, 0, 10),
                                         Running(6, 0, 20), Running(8, 1, 1)};
  std::vector<Move> moves = PlanDrain(0, running, absl::MakeSpan(ws), policy);
  ASSERT_EQ(moves.size(), 3u);
  // Least-loaded: worker 1 (2) takes #5 -> 3; tie 1 vs 2 at 3 -> lower id 1 takes #6 -> 4
  // (full); worker 2 takes #7.
  EXPECT_EQ(moves[0].request_id, 5u);
  EXPECT_EQ(moves[0].to_worker, 1);
  EXPECT_EQ(moves[1].request_id, 6u);
  EXPECT_EQ(moves[1].to_worker, 1);
  EXPECT_EQ(moves[2].request_id, 7u);
  EXPECT_EQ(moves[2].to_worker, 2);
  EXPECT_EQ(ws[0].running, 0);
  EXPECT_EQ(ws[0].kv_pages_free, 1006);
  EXPECT_EQ(ws[1].load(), 4);
  EXPECT_EQ(ws[2].load(), 4);

  // Nothing left anywhere: the next drain requeues.
  ws[1].draining = true;
  std::vector<RunningRequest> more = {Running(9, 1, 1)};
  moves = PlanDrain(1, more, absl::MakeSpan(ws), policy);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].to_worker, -1);
}

TEST(PlanConsolidation, EmptiesTheLeastLoadedWorkerOntoFullerOnes) {
  PlacementOptions o = Options(8);
  std::vector<WorkerView> ws = {Worker(0, 6), Worker(1, 2), Worker(2, 7), Worker(3, 0)};
  std::vector<RunningRequest> running = {Running(1, 1, 2), Running(2, 1, 1)};
  std::vector<Move> moves = PlanConsolidation(running, absl::MakeSpan(ws), o, {8});
  ASSERT_EQ(moves.size(), 2u);
  // Oldest (#2) first to the fullest (worker 2: 7 -> 8, full), then #1 to worker 0.
  EXPECT_EQ(moves[0].request_id, 2u);
  EXPECT_EQ(moves[0].from_worker, 1);
  EXPECT_EQ(moves[0].to_worker, 2);
  EXPECT_EQ(moves[1].request_id, 1u);
  EXPECT_EQ(moves[1].to_worker, 0);
  EXPECT_EQ(ws[1].load(), 0);  // can go idle
  EXPECT_EQ(ws[3].load(), 0);  // idle workers are never destinations
}

TEST(PlanConsolidation, NoPlanWhenTheSourceCannotBeEmptied) {
  PlacementOptions o = Options(8);
  // Worker 1 (load 3) would need 3 slots on workers with load >= 3; only 1 is free.
  std::vector<WorkerView> ws = {Worker(0, 7), Worker(1, 3), Worker(2, 1)};
  ws[2].draining = true;
  std::vector<RunningRequest> running = {Running(1, 1, 1), Running(2, 1, 2),
                                         Running(3, 1, 3)};
  const std::vector<WorkerView> before = ws;
  EXPECT_TRUE(PlanConsolidation(running, absl::MakeSpan(ws), o, {8}).empty());
  EXPECT_EQ(ws[0].load(), before[0].load());  // views untouched
  EXPECT_EQ(ws[1].load(), before[1].load());
  // A source above max_source_load is not considered at all.
  ws[0].running = 4;
  EXPECT_TRUE(PlanConsolidation(running, absl::MakeSpan(ws), o, {2}).empty());
  // With room it goes through.
  EXPECT_EQ(PlanConsolidation(running, absl::MakeSpan(ws), o, {8}).size(), 3u);
}

TEST(PlanConsolidation, RespectsTheMigrationKvWatermark) {
  PlacementOptions o = Options(8);
  o.kv_migrate_free_fraction = 0.5;  // destinations must keep 500 of 1000 pages free
  std::vector<WorkerView> ws = {Worker(0, 6, 501), Worker(1, 1)};
  std::vector<RunningRequest> running = {Running(1, 1, 1)};  // needs 2 pages
  EXPECT_TRUE(PlanConsolidation(running, absl::MakeSpan(ws), o, {8}).empty());
  ws[0].kv_pages_free = 502;
  EXPECT_EQ(PlanConsolidation(running, absl::MakeSpan(ws), o, {8}).size(), 1u);
}

}  // namespace
}  // namespace loom
