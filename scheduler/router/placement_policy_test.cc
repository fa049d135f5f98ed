#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/router/least_loaded_policy.h"
#include "scheduler/router/punica_policy.h"
#include "scheduler/router/round_robin_policy.h"

namespace loom {
namespace {

WorkerView Worker(int id, int running, int32_t free = 1000, int32_t total = 1000,
                  std::vector<std::string> adapters = {}) {
  WorkerView w;
  w.id = id;
  w.running = running;
  w.kv_pages_free = free;
  w.kv_pages_total = total;
  std::sort(adapters.begin(), adapters.end());
  w.resident_adapters = adapters;
  return w;
}

PlacementRequest Req(const std::string& adapter = "a", int context = 100) {
  PlacementRequest r;
  r.id = 1;
  r.adapter_id = adapter;
  r.context_tokens = context;
  r.max_new_tokens = 50;
  return r;
}

int ChosenId(PlacementPolicy& p, const std::vector<WorkerView>& ws, const PlacementRequest& r) {
  const int i = p.ChooseForNew(r, ws);
  return i < 0 ? -1 : ws[i].id;
}

TEST(PagesNeeded, PromptPlusOneOrFullReservation) {
  PlacementOptions o;  // page 16
  PlacementRequest r = Req("a", 31);  // 31 + 1 = 32 tokens = 2 pages
  EXPECT_EQ(PagesNeeded(r, o), 2);
  r.context_tokens = 32;  // 33 tokens = 3 pages
  EXPECT_EQ(PagesNeeded(r, o), 3);
  o.reserve_max_new_tokens = true;  // 32 + 50 = 82 tokens = 6 pages
  EXPECT_EQ(PagesNeeded(r, o), 6);
}

TEST(PunicaPolicy, LargestBatchBelowTheCap) {
  PunicaPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(0, 3), Worker(1, 10), Worker(2, 32), Worker(3, 7)};
  EXPECT_EQ(ChosenId(p, ws, Req()), 1);  // 32 is full (max_batch_size 32)
  ws[1].queued = 22;                       // 10 + 22 = 32: full too
  EXPECT_EQ(ChosenId(p, ws, Req()), 3);
}

TEST(PunicaPolicy, TiesGoToTheLowerIdWhateverTheOrder) {
  PunicaPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(2, 5), Worker(0, 5), Worker(1, 5)};
  EXPECT_EQ(ChosenId(p, ws, Req()), 0);
}

TEST(PunicaPolicy, AdapterResidencyBreaksTiesButNotLoad) {
  PunicaPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(0, 5), Worker(1, 5, 1000, 1000, {"x", "a"})};
  EXPECT_EQ(ChosenId(p, ws, Req("a")), 1);
  EXPECT_EQ(ChosenId(p, ws, Req("b")), 0);
  ws[0].running = 6;  // a fuller batch beats residency
  EXPECT_EQ(ChosenId(p, ws, Req("a")), 0);
}

TEST(PunicaPolicy, KvWatermarkRefusesAndFallsBackOrQueues) {
  PlacementOptions o;
  o.kv_admit_free_fraction = 0.10;
  PunicaPolicy p(o);
  // Request of 100 tokens needs ceil(101 / 16) = 7 pages. Worker 0 would keep 16 - 7 = 9
  // free < ceil(0.1 * 100) = 10: refused. Worker 1 keeps 17 - 7 = 10: accepted.
  std::vector<WorkerView> ws = {Worker(0, 20, 16, 100), Worker(1, 3, 17, 100)};
  EXPECT_EQ(ChosenId(p, ws, Req()), 1);
  ws[1].kv_pages_free = 16;
  EXPECT_EQ(ChosenId(p, ws, Req()), -1);
  // Without the watermark both fit and the fuller one wins.
  PunicaPolicy q(PlacementOptions{});
  EXPECT_EQ(ChosenId(q, ws, Req()), 0);
}

TEST(PunicaPolicy, DrainingWorkersAreNeverChosen) {
  PunicaPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(0, 20), Worker(1, 2)};
  ws[0].draining = true;
  EXPECT_EQ(ChosenId(p, ws, Req()), 1);
  ws[1].draining = true;
  EXPECT_EQ(ChosenId(p, ws, Req()), -1);
}

TEST(PunicaPolicy, EligibilityExcludesAndRequiresMinLoad) {
  PunicaPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(0, 20), Worker(1, 4), Worker(2, 2)};
  EXPECT_EQ(p.Choose(Req(), ws, Eligibility{0.0, 0, 0}), 1);
  EXPECT_EQ(p.Choose(Req(), ws, Eligibility{0.0, 0, 5}), -1);
}

// Reference: sort the eligible workers by the documented key and take the first.
TEST(PunicaPolicy, MatchesSortedReferenceOnRandomClusters) {
  std::mt19937 rng(7);
  PlacementOptions o;
  o.max_batch_size = 8;
  o.kv_admit_free_fraction = 0.05;
  PunicaPolicy p(o);
  LeastLoadedPolicy ll(o);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<WorkerView> ws;
    const int n = 1 + rng() % 10;
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> adapters;
      if (rng() % 2) adapters.push_back("a");
      ws.push_back(Worker(static_cast<int>(rng() % 100) * 10 + i, rng() % 10,
                          static_cast<int32_t>(rng() % 40), 100, adapters));
      ws.back().draining = rng() % 8 == 0;
    }
    const PlacementRequest r = Req("a", 1 + rng() % 200);
    std::vector<const WorkerView*> eligible;
    for (const WorkerView& w : ws) {
      const int32_t left = w.kv_pages_free - PagesNeeded(r, o);
      if (!w.draining && w.load() < 8 && left >= 5) eligible.push_back(&w);
    }
    auto sorted = eligible;
    std::sort(sorted.begin(), sorted.end(), [](const WorkerView* a, const WorkerView* b) {
      if (a->load() != b->load()) return a->load() > b->load();
      if (a->HasAdapter("a") != b->HasAdapter("a")) return a->HasAdapter("a");
      return a->id < b->id;
    });
    EXPECT_EQ(ChosenId(p, ws, r), sorted.empty() ? -1 : sorted[0]->id) << "trial " << trial;
    std::sort(eligible.begin(), eligible.end(), [](const WorkerView* a, const WorkerView* b) {
      if (a->load() != b->load()) return a->load() < b->load();
      if (a->HasAdapter("a") != b->HasAdapter("a")) return a->HasAdapter("a");
      return a->id < b->id;
    });
    EXPECT_EQ(ChosenId(ll, ws, r), eligible.empty() ? -1 : eligible[0]->id) << "trial " << trial;
  }
}

TEST(LeastLoadedPolicy, SmallestLoadThenResidencyThenId) {
  LeastLoadedPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(3, 4), Worker(1, 2), Worker(2, 2), Worker(0, 9)};
  EXPECT_EQ(ChosenId(p, ws, Req()), 1);
  ws[2].resident_adapters = {"a"};
  EXPECT_EQ(ChosenId(p, ws, Req("a")), 2);
  ws[1].queued = 1;  // queued counts as load
  EXPECT_EQ(ChosenId(p, ws, Req("b")), 2);
}

TEST(LeastLoadedPolicy, FullEverywhereQueues) {
  LeastLoadedPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(0, 32), Worker(1, 32)};
  EXPECT_EQ(ChosenId(p, ws, Req()), -1);
}

TEST(RoundRobinPolicy, CyclesByIdAndSkipsIneligible) {
  RoundRobinPolicy p(PlacementOptions{});
  std::vector<WorkerView> ws = {Worker(2, 0), Worker(0, 30), Worker(1, 0)};
  std::vector<int> got;
  for (int i = 0; i < 4; ++i) got.push_back(ChosenId(p, ws, Req()));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 0}));
  ws[0].running = 32;  // worker 2 full: skipped
  got.clear();
  for (int i = 0; i < 3; ++i) got.push_back(ChosenId(p, ws, Req()));
  EXPECT_EQ(got, (std::vector<int>{1, 0, 1}));
}

TEST(CreatePlacementPolicy, NamesAndOptionValidation) {
  for (const char* name : {"punica", "round_robin", "least_loaded"}) {
    auto p = CreatePlacementPolicy(name, PlacementOptions{});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->name(), name);
  }
  EXPECT_EQ(CreatePlacementPolicy("fifo", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  PlacementOptions bad;
  bad.kv_admit_free_fraction = 1.0;
  EXPECT_EQ(CreatePlacementPolicy("punica", bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = PlacementOptions{};
  bad.max_batch_size = 0;
  EXPECT_EQ(CreatePlacementPolicy("punica", bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
