#include "store/commit_watch.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace tessera {
namespace {

// A store whose Commit blocks until the test lets it go (a frozen disk).
class FrozenStore final : public Store {
 public:
  Status Commit(WriteBatch batch) override {
    entered_.set_value();
    release_.get_future().wait();
    return inner_.Commit(std::move(batch));
  }
  StatusOr<std::vector<JobRow>> LoadJobs() override { return inner_.LoadJobs(); }
  StatusOr<std::optional<JobRow>> LoadJob(uint64_t id) override { return inner_.LoadJob(id); }
  StatusOr<std::vector<UsageRow>> LoadUsage(int64_t a, int64_t b) override {
    return inner_.LoadUsage(a, b);
  }
  StatusOr<std::vector<TokenRow>> LoadTokens() override { return inner_.LoadTokens(); }
  StatusOr<std::optional<std::string>> GetKv(std::string_view key) override {
    return inner_.GetKv(key);
  }
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListKv(
      std::string_view prefix) override {
    return inner_.ListKv(prefix);
  }
  Status Close() override { return inner_.Close(); }

  std::promise<void> entered_;
  std::promise<void> release_;

 private:
  InMemoryStore inner_;
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
