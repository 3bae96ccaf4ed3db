#include "store/commit_watch.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace tessera {
namespace {

// A store whose Commit blocks until the test lets it go (a frozen disk).
class FrozenStore final : public ForwardingStore {
 public:
  FrozenStore() : ForwardingStore(std::make_unique<InMemoryStore>()) {}
  Status Commit(WriteBatch batch) override {
    entered_.set_value();
    release_.get_future().wait();
    return ForwardingStore::Commit(std::move(batch));
  }

  std::promise<void> entered_;
  std::promise<void> release_;
};

TEST(CommitWatchTest, TheOldestCommitUnderWayIsTimedUntilItIsAnswered) {
  ManualClock clock(1'000'000);
  auto frozen = std::make_unique<FrozenStore>();
  FrozenStore* store = frozen.get();
  CommitWatch watch(std::move(frozen), clock);
  EXPECT_EQ(watch.OldestCommitWait(), 0);
  WriteBatch batch;
  batch.kv.emplace_back("k", "v");
  std::thread writer([&] { EXPECT_TRUE(watch.Commit(std::move(batch)).ok()); });
  store->entered_.get_future().wait();
  clock.Advance(6'000'000);
  EXPECT_EQ(watch.OldestCommitWait(), 6'000'000);
  store->release_.set_value();
  writer.join();
  EXPECT_EQ(watch.OldestCommitWait(), 0);
  auto kv = watch.GetKv("k");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->value_or(""), "v");
}

}  // namespace
}  // namespace tessera
