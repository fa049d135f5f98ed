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
  AdapterManager manager(&store, *roots, /*on_demand=*/true, /*metrics=*/nullptr);

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
  AdapterManager manager(&store, *roots, /*on_demand=*/true, /*metrics=*/nullptr);
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

}  // namespace
}  // namespace loom
