#include "server/adapter_manager.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "models/lora/adapter_loader.h"
#include "models/lora/lora_test_util.h"

namespace loom {
namespace {

using ::loom::testing::FreshDir;
using ::loom::testing::TinyLoraBase;
using ::loom::testing::WriteTestPeft;

// A request that arrives while another request's on-demand load of the same adapter is
// still running must wait for that load, not be submitted against a LOADING adapter
// (which the engine refuses as "still loading": on a cluster worker the router would
// take that UNAVAILABLE for a lost worker).
TEST(AdapterManagerTest, RequestDuringAnOnDemandLoadWaitsForIt) {
  const LlamaConfig base = TinyLoraBase();
  const std::string root = FreshDir("roots");
  const std::string written = WriteTestPeft(base, SyntheticAdapterSpec{}, "adapter");
  std::filesystem::rename(written, root + "/ad");

  absl::Notification release_load;
  std::atomic<int> loads{0};
  AdapterStore store(base, AdapterStore::Options{}, [&](const std::string& src) {
    loads.fetch_add(1);
    release_load.WaitForNotification();  // hold the first load in LOADING
    return LoadAdapter(src, base, AdapterLimits{});
  });
  absl::StatusOr<AdapterRoots> roots = AdapterRoots::Create({root});
  ASSERT_TRUE(roots.ok()) << roots.status();
  AdapterManager manager(&store, *roots, AdapterManager::Options{}, /*metrics=*/nullptr);

  absl::Notification first_done, second_done;
  absl::Status first, second;
  AdapterState state_at_second = AdapterState::kLoading;
  manager.EnsureKnownAsync("ad", [&](absl::Status s) {
    first = s;
    first_done.Notify();
  });
  // Wait until the first load holds the adapter in LOADING.
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<AdapterInfo> info = store.Info("ad");
    if (info.ok() && info->state == AdapterState::kLoading) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(store.Info("ad")->state, AdapterState::kLoading);
  manager.EnsureKnownAsync("ad", [&](absl::Status s) {
    second = s;
    state_at_second = store.Info("ad")->state;
    second_done.Notify();
  });
  EXPECT_FALSE(second_done.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "the second request was let through while the adapter was loading";
  release_load.Notify();
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(second_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_TRUE(second.ok()) << second;
  EXPECT_EQ(state_at_second, AdapterState::kReady);
  EXPECT_EQ(loads.load(), 1);
}

// A load that fails while a second request waits gives that request the failure.
TEST(AdapterManagerTest, WaitingRequestSeesTheLoadFailure) {
  const LlamaConfig base = TinyLoraBase();
  const std::string root = FreshDir("roots_bad");
  std::filesystem::create_directories(root + "/bad");  // no adapter files: load fails
  absl::Notification release_load;
  AdapterStore store(base, AdapterStore::Options{}, [&](const std::string& src) {
    release_load.WaitForNotification();
    return LoadAdapter(src, base, AdapterLimits{});
  });
  absl::StatusOr<AdapterRoots> roots = AdapterRoots::Create({root});
  ASSERT_TRUE(roots.ok()) << roots.status();
  AdapterManager manager(&store, *roots, AdapterManager::Options{}, /*metrics=*/nullptr);
  absl::Notification first_done, second_done;
  absl::Status second;
  manager.EnsureKnownAsync("bad", [&](absl::Status) { first_done.Notify(); });
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<AdapterInfo> info = store.Info("bad");
    if (info.ok() && info->state == AdapterState::kLoading) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  manager.EnsureKnownAsync("bad", [&](absl::Status s) {
    second = s;
    second_done.Notify();
  });
  release_load.Notify();
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(second_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition) << second;
}

// On-demand loads of distinct ids are bounded: while max_on_demand_loads of them are
// queued or running, a request for another unloaded id is refused at once (it does not
// queue behind them), a request for an id already being loaded waits for that load, and
// the bound frees up as loads end.
TEST(AdapterManagerTest, OnDemandLoadsBeyondTheBoundAreRefusedAtOnce) {
  const LlamaConfig base = TinyLoraBase();
  const std::string root = FreshDir("roots_bound");
  for (const char* id : {"a", "b", "c", "d"}) {
    std::filesystem::rename(WriteTestPeft(base, SyntheticAdapterSpec{}, id),
                            root + "/" + id);
  }
  absl::Notification release_loads;
  std::atomic<int> loads{0};
  AdapterStore store(base, AdapterStore::Options{}, [&](const std::string& src) {
    loads.fetch_add(1);
    release_loads.WaitForNotification();
    return LoadAdapter(src, base, AdapterLimits{});
  });
  absl::StatusOr<AdapterRoots> roots = AdapterRoots::Create({root});
  ASSERT_TRUE(roots.ok()) << roots.status();
  AdapterManager::Options options;
  options.max_on_demand_loads = 2;
  AdapterManager manager(&store, *roots, options, /*metrics=*/nullptr);

  struct Outcome {
    absl::Notification done;
    absl::Status status;
  };
  Outcome a, b, c, a_again, d;
  auto ensure = [&](const char* id, Outcome* out) {
    manager.EnsureKnownAsync(id, [out](absl::Status s) {
      out->status = s;
      out->done.Notify();
    });
  };
  ensure("a", &a);
  ensure("b", &b);
  EXPECT_EQ(manager.on_demand_loads_in_flight(), 2);
  ensure("c", &c);
  ASSERT_TRUE(c.done.HasBeenNotified()) << "the third distinct load was queued";
  EXPECT_EQ(c.status.code(), absl::StatusCode::kResourceExhausted) << c.status;
  EXPECT_NE(std::string(c.status.message()).find("max_on_demand_loads"), std::string::npos);
  ensure("a", &a_again);  // same id: waits for its load instead of being refused
  EXPECT_FALSE(a_again.done.HasBeenNotified());
  release_loads.Notify();
  for (Outcome* o : {&a, &b, &a_again}) {
    ASSERT_TRUE(o->done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_TRUE(o->status.ok()) << o->status;
  }
  EXPECT_EQ(manager.on_demand_loads_in_flight(), 0);
  ensure("d", &d);  // room again
  ASSERT_TRUE(d.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(d.status.ok()) << d.status;
  EXPECT_EQ(loads.load(), 3);  // a, b, d; never c, never a twice
}

}  // namespace
}  // namespace loom
