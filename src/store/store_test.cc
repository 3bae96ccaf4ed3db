// The Store contract (store_contract_test.cc) on InMemoryStore, SqliteStore and Store's
// default paging, and the in-memory store's own hooks.
#include "store/store.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/testing/temp_dir.h"
#include "store/sqlite_store.h"
#include "store/store_contract_test.h"

namespace tessera {
namespace {

using store_contract::Ids;
using store_contract::MakeJob;
using store_contract::StoreFactory;
using store_contract::StoreTest;

// A store that keeps Store's own LoadJobsPage and LoadUsageOfJobs (what a store that does
// not override them answers): the same contract.
class DefaultPagingStore final : public Store {
 public:
  Status Commit(WriteBatch batch) override { return inner_.Commit(std::move(batch)); }
  StatusOr<std::vector<JobRow>> LoadJobs() override { return inner_.LoadJobs(); }
  StatusOr<std::optional<JobRow>> LoadJob(uint64_t id) override { return inner_.LoadJob(id); }
  StatusOr<std::vector<UsageRow>> LoadUsage(int64_t since_us, int64_t until_us) override {
    return inner_.LoadUsage(since_us, until_us);
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

 private:
  InMemoryStore inner_;
};

INSTANTIATE_TEST_SUITE_P(
    Stores, StoreTest,
    ::testing::Values(StoreFactory{"memory",
                                   [](const std::string&) -> std::unique_ptr<Store> {
                                     return std::make_unique<InMemoryStore>();
                                   }},
                      StoreFactory{"sqlite",
                                   [](const std::string& dir) -> std::unique_ptr<Store> {
                                     SqliteStoreOptions options;
                                     options.fsync =
                                         false;  // durability is tested in sqlite_store_test
                                     auto store = OpenSqliteStore(dir + "/tessera.db", options);
                                     if (!store.ok()) {
                                       ADD_FAILURE() << store.status().ToString();
                                       return nullptr;
                                     }
                                     return std::move(store).value();
                                   }},
                      StoreFactory{"defaults",
                                   [](const std::string&) -> std::unique_ptr<Store> {
                                     return std::make_unique<DefaultPagingStore>();
                                   }}),
    [](const ::testing::TestParamInfo<StoreFactory>& param_info) { return param_info.param.name; });

TEST(InMemoryStoreTest, InjectedErrorFailsCommitsUntilCleared) {
  InMemoryStore store;
  WriteBatch batch;
  batch.jobs = {MakeJob(1)};
  store.InjectCommitError(UnavailableError("disk gone"));
  Status status = store.Commit(batch);
  EXPECT_EQ(status, UnavailableError("disk gone"));
  EXPECT_TRUE(store.LoadJobs().value().empty());
  EXPECT_EQ(store.commits(), 0u);
  store.InjectCommitError(Status::Ok());
  EXPECT_TRUE(store.Commit(batch).ok());
  EXPECT_EQ(store.LoadJobs().value().size(), 1u);
  EXPECT_EQ(store.commits(), 1u);
}

TEST(JobStateTest, KnowsTheStates) {
  EXPECT_TRUE(IsValidJobState("pending"));
  EXPECT_TRUE(IsValidJobState("cancelled"));
  EXPECT_FALSE(IsValidJobState("Pending"));
  EXPECT_FALSE(IsValidJobState(""));
}

}  // namespace
}  // namespace tessera
