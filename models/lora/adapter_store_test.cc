#include "models/lora/adapter_store.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/lora/adapter_loader.h"
#include "models/lora/lora_test_util.h"
#include "models/lora/peft_writer.h"

namespace loom {
namespace {

using ::loom::testing::TinyLoraBase;
using ::loom::testing::WriteTestPeft;
using ::testing::HasSubstr;

class AdapterStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 4; ++i) {
      SyntheticAdapterSpec spec;
      spec.rank = 4;
      spec.seed = 100 + i;
      dirs_.push_back(WriteTestPeft(base_, spec, "store"));
    }
    auto probe = LoadAdapter(dirs_[0], base_, {});
    ASSERT_TRUE(probe.ok()) << probe.status();
    bytes_ = (*probe)->bytes();
  }

  // A store whose loader counts loads per source.
  std::unique_ptr<AdapterStore> MakeStore(double budget_in_adapters) {
    AdapterStore::Options o;
    o.budget_bytes = static_cast<size_t>(budget_in_adapters * bytes_);
    const LlamaConfig b = base_;
    return std::make_unique<AdapterStore>(
        base_, o, [this, b](const std::string& src) {
          loads_.fetch_add(1);
          return LoadAdapter(src, b, AdapterLimits{});
        });
  }

  bool Resident(AdapterStore& s, const std::string& id) {
    auto info = s.Info(id);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() && info->resident;
  }

  LlamaConfig base_ = TinyLoraBase();
  std::vector<std::string> dirs_;
  size_t bytes_ = 0;
  std::atomic<int> loads_{0};
};

TEST_F(AdapterStoreTest, StatesAndInfo) {
  auto store = MakeStore(10);
  ASSERT_TRUE(store->Register("a", dirs_[0]).ok());
  auto info = store->Info("a");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, AdapterState::kReady);
  EXPECT_TRUE(info->resident);
  EXPECT_EQ(info->bytes, bytes_);
  EXPECT_EQ(info->rank, 4);
  EXPECT_EQ(info->targets.size(), 7u);
  EXPECT_EQ(store->resident_bytes(), bytes_);

  absl::Status st = store->Register("bad", dirs_[0] + "/missing");
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  info = store->Info("bad");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, AdapterState::kFailed);
  EXPECT_THAT(info->error, HasSubstr("missing"));
  EXPECT_EQ(store->Acquire("bad").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->Acquire("never").status().code(), absl::StatusCode::kNotFound);

  auto lease = store->Acquire("a");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)->id(), "a");
  EXPECT_NE((*lease)->Pair(1, LoraTarget::kDown), nullptr);
  EXPECT_EQ(store->Info("a")->active_leases, 1);
  EXPECT_EQ(store->Info("a")->requests_served, 1u);
  lease->Reset();
  EXPECT_EQ(store->Info("a")->active_leases, 0);
  ASSERT_EQ(store->List().size(), 2u);
  EXPECT_EQ(store->List()[0].id, "a");
}

TEST_F(AdapterStoreTest, AdapterLargerThanBudgetIsRefused) {
  auto store = MakeStore(0.5);
  absl::Status st = store->Register("a", dirs_[0]);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(store->Info("a")->state, AdapterState::kFailed);
  EXPECT_EQ(store->resident_bytes(), 0u);
}

TEST_F(AdapterStoreTest, EvictsLeastRecentlyUsedByBytes) {
  auto store = MakeStore(2.5);
  ASSERT_TRUE(store->Register("a", dirs_[0]).ok());
  ASSERT_TRUE(store->Register("b", dirs_[1]).ok());
  ASSERT_TRUE(store->Acquire("a").ok());  // a is now more recent than b
  ASSERT_TRUE(store->Register("c", dirs_[2]).ok());
  EXPECT_TRUE(Resident(*store, "a"));
  EXPECT_FALSE(Resident(*store, "b"));
  EXPECT_TRUE(Resident(*store, "c"));
  EXPECT_EQ(store->Info("b")->state, AdapterState::kReady);  // still registered
  EXPECT_LE(store->resident_bytes(), store->budget_bytes());
  const int before = loads_.load();
  ASSERT_TRUE(store->Acquire("b").ok());  // reloads b, evicting a (least recent)
  EXPECT_EQ(loads_.load(), before + 1);
  EXPECT_FALSE(Resident(*store, "a"));
  EXPECT_TRUE(Resident(*store, "b"));
  EXPECT_TRUE(Resident(*store, "c"));
}

TEST_F(AdapterStoreTest, InUseAndPinnedAreNeverEvicted) {
  auto store = MakeStore(2);
  ASSERT_TRUE(store->Register("a", dirs_[0]).ok());
  ASSERT_TRUE(store->Register("b", dirs_[1], /*pin=*/true).ok());
  auto lease_a = store->Acquire("a");
  ASSERT_TRUE(lease_a.ok());
  // No room: a is in use, b pinned. c registers but is not resident.
  ASSERT_TRUE(store->Register("c", dirs_[2]).ok());
  EXPECT_FALSE(Resident(*store, "c"));
  absl::StatusOr<AdapterLease> lc = store->Acquire("c");
  EXPECT_EQ(lc.status().code(), absl::StatusCode::kResourceExhausted) << lc.status();
  EXPECT_EQ(store->Register("d", dirs_[3], /*pin=*/true).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Resident(*store, "a"));
  EXPECT_TRUE(Resident(*store, "b"));
  // Once a is released it is the only evictable one.
  lease_a->Reset();
  lc = store->Acquire("c");
  ASSERT_TRUE(lc.ok()) << lc.status();
  EXPECT_FALSE(Resident(*store, "a"));
  EXPECT_TRUE(Resident(*store, "b"));
  // Unpinned, b becomes evictable.
  lc->Reset();
  ASSERT_TRUE(store->Unpin("b").ok());
  ASSERT_TRUE(store->Acquire("c").ok());  // c more recent than b
  ASSERT_TRUE(store->Acquire("a").ok());
  EXPECT_FALSE(Resident(*store, "b"));
  // Pinning an evicted adapter makes it resident.
  ASSERT_TRUE(store->Pin("b").ok());
  EXPECT_TRUE(Resident(*store, "b"));
  EXPECT_TRUE(store->Info("b")->pinned);
}

TEST_F(AdapterStoreTest, ReloadAfterEvictionGivesIdenticalWeights) {
  auto store = MakeStore(1);
  ASSERT_TRUE(store->Register("a", dirs_[0]).ok());
  uint64_t fp;
  std::vector<uint16_t> b_row;
  {
    auto l = store->Acquire("a");
    ASSERT_TRUE(l.ok());
    fp = (*l)->Fingerprint();
    const kernels::LoraPair* p = (*l)->Pair(1, LoraTarget::kK);
    b_row.assign(p->b, p->b + 4 * 32);
  }
  ASSERT_TRUE(store->Register("b", dirs_[1]).ok());  // evicts a
  EXPECT_FALSE(Resident(*store, "a"));
  auto l = store->Acquire("a");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)->Fingerprint(), fp);
  EXPECT_EQ(0, std::memcmp((*l)->Pair(1, LoraTarget::kK)->b, b_row.data(), b_row.size() * 2));
  l->Reset();

  // The source changed on disk after registration: the reload is refused.
  ASSERT_TRUE(store->Acquire("b").ok());  // evicts a again
  SyntheticAdapterSpec other;
  other.rank = 4;
  other.seed = 999;
  auto syn = MakeSyntheticAdapter(base_, other);
  ASSERT_TRUE(syn.ok());
  ASSERT_TRUE(WritePeftAdapter(*syn, dirs_[0]).ok());
  absl::Status st = store->Acquire("a").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("changed"));
}

TEST_F(AdapterStoreTest, UnloadDrainsAndLeaseOutlivesIt) {
  auto store = MakeStore(4);
  ASSERT_TRUE(store->Register("a", dirs_[0]).ok());
  auto lease = store->Acquire("a");
  ASSERT_TRUE(lease.ok());
  const uint64_t fp = (*lease)->Fingerprint();
  ASSERT_TRUE(store->Unload("a").ok());
  EXPECT_EQ(store->Info("a")->state, AdapterState::kUnloading);
  EXPECT_EQ(store->Acquire("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->Unload("a").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*lease)->Fingerprint(), fp);  // weights intact under the running sequence
  EXPECT_EQ(store->resident_bytes(), bytes_);
  lease->Reset();
  EXPECT_EQ(store->Info("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->resident_bytes(), 0u);
  EXPECT_TRUE(store->List().empty());
  // An idle adapter unloads at once.
  ASSERT_TRUE(store->Register("b", dirs_[1]).ok());
  ASSERT_TRUE(store->Unload("b").ok());
  EXPECT_EQ(store->Info("b").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AdapterStoreTest, ReRegisterReplacesForNewAcquirersOnly) {
  auto store = MakeStore(4);
  ASSERT_TRUE(store->Register("x", dirs_[0]).ok());
  auto old_lease = store->Acquire("x");
  ASSERT_TRUE(old_lease.ok());
  const uint64_t old_fp = (*old_lease)->Fingerprint();
  ASSERT_TRUE(store->Register("x", dirs_[1]).ok());
  auto new_lease = store->Acquire("x");
  ASSERT_TRUE(new_lease.ok());
  EXPECT_NE((*new_lease)->Fingerprint(), old_fp);
  EXPECT_GT(new_lease->generation(), old_lease->generation());
  EXPECT_EQ((*old_lease)->Fingerprint(), old_fp);
  EXPECT_EQ(store->resident_bytes(), 2 * bytes_);  // the old one is still in use
  old_lease->Reset();
  EXPECT_EQ(store->resident_bytes(), bytes_);
  // A failed replacement keeps the current version serving.
  const uint64_t gen = store->Info("x")->generation;
  EXPECT_FALSE(store->Register("x", dirs_[1] + "/nope").ok());
  auto info = store->Info("x");
  EXPECT_EQ(info->state, AdapterState::kReady);
  EXPECT_EQ(info->generation, gen);
  EXPECT_FALSE(info->error.empty());
  EXPECT_TRUE(store->Acquire("x").ok());
}

TEST_F(AdapterStoreTest, LeaseOutlivesStore) {
  AdapterLease lease;
  {
    auto store = MakeStore(4);
    ASSERT_TRUE(store->Register("a", dirs_[0]).ok());
    auto l = store->Acquire("a");
    ASSERT_TRUE(l.ok());
    lease = *std::move(l);
  }
  ASSERT_TRUE(lease);
  EXPECT_NE(lease->Pair(0, LoraTarget::kQ), nullptr);
  lease.Reset();
  EXPECT_FALSE(lease);
}

TEST_F(AdapterStoreTest, ConcurrentAcquireRelease) {
  auto store = MakeStore(2);  // 3 adapters, room for 2: eviction and reloads under load
  std::vector<uint64_t> fps;
  for (int i = 0; i < 3; ++i) {
    const std::string id = "a" + std::to_string(i);
    ASSERT_TRUE(store->Register(id, dirs_[i]).ok());
    auto l = store->Acquire(id);
    ASSERT_TRUE(l.ok());
    fps.push_back((*l)->Fingerprint());
  }
  std::atomic<int> ok{0}, exhausted{0}, wrong{0}, over_budget{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 60; ++k) {
        const int i = (t + k) % 3;
        auto l = store->Acquire("a" + std::to_string(i));
        if (store->resident_bytes() > store->budget_bytes()) over_budget++;
        if (!l.ok()) {
          if (absl::IsResourceExhausted(l.status())) {
            exhausted++;
          } else {
            wrong++;
          }
          continue;
        }
        if ((*l)->Fingerprint() != fps[i]) wrong++;
        ok++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(over_budget.load(), 0);
  EXPECT_EQ(ok.load() + exhausted.load(), 240);
  EXPECT_GT(ok.load(), 0);
  uint64_t served = 0;
  for (const AdapterInfo& info : store->List()) {
    EXPECT_EQ(info.active_leases, 0);
    served += info.requests_served;
  }
  EXPECT_EQ(served, 3u + ok.load());
  EXPECT_LE(store->resident_bytes(), store->budget_bytes());
}

}  // namespace
}  // namespace loom
