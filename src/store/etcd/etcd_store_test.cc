// EtcdStore on a real 3-member etcd cluster (shared by this binary's tests): the Store
// contract, group commit, the Txn size limit, two writers on one prefix, and fencing.
#include "store/etcd/etcd_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/etcd/testing/etcd_cluster.h"
#include "store/store_contract_test.h"
#include "store/store_url.h"

namespace tessera {
namespace {

using store_contract::Ids;
using store_contract::MakeJob;
using store_contract::MakeUsage;
using store_contract::StoreFactory;
using store_contract::StoreTest;

// Each store of these tests has a prefix of its own on the shared cluster.
std::string FreshPrefix(const std::string& what) {
  static std::atomic<int> next{0};
  return "/test/" + what + "/" + std::to_string(next.fetch_add(1)) + "/";
}

StatusOr<std::unique_ptr<EtcdStore>> OpenOnCluster(EtcdStoreOptions options) {
  TESSERA_ASSIGN_OR_RETURN(testing::EtcdCluster * cluster, testing::SharedEtcdCluster());
  options.endpoints = cluster->EndpointList();
  return EtcdStore::Open(std::move(options));
}

INSTANTIATE_TEST_SUITE_P(
    Etcd, StoreTest,
    ::testing::Values(StoreFactory{"etcd",
                                   [](const std::string&) -> std::unique_ptr<Store> {
                                     EtcdStoreOptions options;
                                     options.prefix = FreshPrefix("contract");
                                     options.max_txn_ops = 10000;  // as the test cluster runs
                                     auto store = OpenOnCluster(options);
                                     if (!store.ok()) {
                                       ADD_FAILURE() << store.status().ToString();
                                       return nullptr;
                                     }
                                     return std::move(store).value();
                                   }}),
    [](const ::testing::TestParamInfo<StoreFactory>& param_info) { return param_info.param.name; });

class EtcdStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<EtcdStore> Open(EtcdStoreOptions options = {}) {
    if (options.prefix == EtcdStoreOptions{}.prefix) {
      options.prefix = FreshPrefix("store");
    }
    auto store = OpenOnCluster(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }
};

TEST_F(EtcdStoreTest, ConcurrentCommitsShareTransactions) {
  EtcdStoreOptions options;
  options.max_txn_ops = 10000;
  std::unique_ptr<EtcdStore> store = Open(options);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 32;
  constexpr int kPerThread = 5;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = static_cast<uint64_t>(t * kPerThread + i + 1);
        WriteBatch batch;
        batch.jobs = {MakeJob(id)};
        batch.usage = {MakeUsage(id, 1, 2)};
        if (!store->Commit(std::move(batch)).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->LoadJobs().value().size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(store->LoadUsage(0, 10).value().size(), static_cast<size_t>(kThreads * kPerThread));
  // Group commit: far fewer Txns than commits.
  EXPECT_LT(store->txns(), static_cast<uint64_t>(kThreads * kPerThread) / 2) << store->txns();
  EXPECT_GE(store->txns(), 1u);
}

TEST_F(EtcdStoreTest, ABatchLargerThanATxnFailsAloneAndSmallOnesSplit) {
  EtcdStoreOptions options;
  options.max_txn_ops = 10;
  std::unique_ptr<EtcdStore> store = Open(options);
  ASSERT_NE(store, nullptr);
  WriteBatch big;
  for (int i = 0; i < 10; ++i) {
    big.kv.emplace_back("big/" + std::to_string(i), "v");
  }
  Status status = store->Commit(big);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find("--max-txn-ops"), std::string::npos) << status.ToString();
  EXPECT_TRUE(store->ListKv("big/").value().empty());
  // Many batches of 3 operations at once: written in several Txns of at most 10, each
  // batch whole.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&, t] {
      WriteBatch batch;
      for (int i = 0; i < 3; ++i) {
        batch.kv.emplace_back("small/" + std::to_string(t) + "/" + std::to_string(i), "v");
      }
      if (!store->Commit(std::move(batch)).ok()) {
        ++failures;
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->ListKv("small/").value().size(), 36u);
  EXPECT_GE(store->txns(), 4u);  // 36 writes and a marker per Txn: at least 4 Txns of <= 10
}

TEST_F(EtcdStoreTest, TwoWritersOnOnePrefixKeepIdempotencyAndUsageOrder) {
  EtcdStoreOptions options;
  options.prefix = FreshPrefix("shared");
  options.max_txn_ops = 10000;
  std::unique_ptr<EtcdStore> a = Open(options);
  std::unique_ptr<EtcdStore> b = Open(options);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  WriteBatch first;
  first.jobs = {MakeJob(1, "team-a", "k")};
  ASSERT_TRUE(a->Commit(first).ok());
  WriteBatch second;
  second.jobs = {MakeJob(2, "team-a", "k")};
  EXPECT_EQ(b->Commit(second).code(), StatusCode::kAlreadyExists);
  // Both append usage at once: every row lands once.
  std::vector<std::thread> threads;
  for (EtcdStore* store : {a.get(), b.get()}) {
    threads.emplace_back([store] {
      for (int i = 0; i < 10; ++i) {
        WriteBatch batch;
        batch.usage = {MakeUsage(1, i, i + 1)};
        EXPECT_TRUE(store->Commit(std::move(batch)).ok());
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(a->LoadUsageOfJobs(1, 1).value().size(), 20u);
  EXPECT_EQ(Ids(b->LoadJobs().value()), (std::vector<uint64_t>{1}));
}

TEST_F(EtcdStoreTest, ReopenedStoreSeesEverythingAndAppendsAfterIt) {
  EtcdStoreOptions options;
  options.prefix = FreshPrefix("reopen");
  std::unique_ptr<EtcdStore> store = Open(options);
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.jobs = {MakeJob(1)};
  batch.usage = {MakeUsage(1, 100, 0)};
  ASSERT_TRUE(store->Commit(batch).ok());
  ASSERT_TRUE(store->Close().ok());
  store = Open(options);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->LoadJob(1).value(), std::optional<JobRow>(MakeJob(1)));
  WriteBatch close;
  close.usage = {MakeUsage(1, 100, 200)};  // same start: after the open row
  ASSERT_TRUE(store->Commit(close).ok());
  EXPECT_EQ(store->LoadUsageOfJobs(1, 1).value(),
            (std::vector<UsageRow>{MakeUsage(1, 100, 0), MakeUsage(1, 100, 200)}));
}

TEST_F(EtcdStoreTest, ManyJobsArePagedThrough) {
  EtcdStoreOptions options;
  options.max_txn_ops = 10000;
  std::unique_ptr<EtcdStore> store = Open(options);
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  for (uint64_t id = 1; id <= 2500; ++id) {
    batch.jobs.push_back(MakeJob(id));
  }
  ASSERT_TRUE(store->Commit(batch).ok());
  auto jobs = store->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2500u);
  EXPECT_EQ(jobs->front().id, 1u);
  EXPECT_EQ(jobs->back().id, 2500u);
  EXPECT_EQ(Ids(store->LoadJobsPage(1998, 0, 1 << 30, 3).value()),
            (std::vector<uint64_t>{1999, 2000, 2001}));
}

TEST_F(EtcdStoreTest, AFencedStoreWritesNothingOnceTheFenceKeyChanges) {
  std::atomic<int> fenced_calls{0};
  EtcdStoreOptions options;
  options.on_fenced = [&fenced_calls] { ++fenced_calls; };
  std::unique_ptr<EtcdStore> store = Open(options);
  ASSERT_NE(store, nullptr);
  EtcdClient& client = *store->client();
  const std::string key = FreshPrefix("fence") + "leader";
  auto created = client.Txn({EtcdCompare::CreateRevision(key, 0)}, {EtcdOp::Put(key, "me")});
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(created->succeeded);
  store->SetFence(key, created->revision);
  WriteBatch mine;
  mine.jobs = {MakeJob(1)};
  ASSERT_TRUE(store->Commit(mine).ok());

  // Another controller takes the key: a new create revision.
  ASSERT_EQ(client.DeleteRange(key).value(), 1);
  auto taken = client.Txn({EtcdCompare::CreateRevision(key, 0)}, {EtcdOp::Put(key, "other")});
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE(taken->succeeded);

  WriteBatch late;
  late.jobs = {MakeJob(2)};
  late.kv = {{"late", "x"}};
  Status status = store->Commit(late);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("fenced"), std::string::npos) << status.ToString();
  EXPECT_EQ(store->Commit(late).code(), StatusCode::kUnavailable);
  EXPECT_EQ(fenced_calls.load(), 1);
  EXPECT_FALSE(store->LoadJob(2).value().has_value());
  EXPECT_FALSE(store->GetKv("late").value().has_value());
  EXPECT_TRUE(store->LoadJob(1).value().has_value());

  // Fenced on the new holder's revision, it writes again.
  store->SetFence(key, taken->revision);
  EXPECT_TRUE(store->Commit(late).ok());
  store->ClearFence();
  ASSERT_EQ(client.DeleteRange(key).value(), 1);
  WriteBatch unfenced;
  unfenced.kv = {{"free", "y"}};
  EXPECT_TRUE(store->Commit(unfenced).ok());
  EXPECT_EQ(fenced_calls.load(), 1);
}

// As a leader's term opens it (cli/ha_server_command.cc): by URL, fenced on the leader key.
TEST_F(EtcdStoreTest, OpenStoreByUrlFencesEveryWriteOnTheGivenKey) {
  auto cluster = testing::SharedEtcdCluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const std::string prefix = FreshPrefix("url");
  const std::string key = prefix + "leader";
  std::unique_ptr<EtcdStore> admin = Open();
  ASSERT_NE(admin, nullptr);
  EtcdClient& client = *admin->client();
  auto created = client.Txn({EtcdCompare::CreateRevision(key, 0)}, {EtcdOp::Put(key, "me")});
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(created->succeeded);

  std::atomic<int> fenced_calls{0};
  OpenStoreOptions options;
  options.etcd.on_fenced = [&fenced_calls] { ++fenced_calls; };
  options.fence = StoreFence{key, created->revision};
  auto store = OpenStore("etcd://" + (*cluster)->Endpoints() + prefix, options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  WriteBatch mine;
  mine.kv = {{"mine", "1"}};
  ASSERT_TRUE((*store)->Commit(mine).ok());
  // Under the URL's prefix.
  EXPECT_TRUE(client.Get(prefix + "kv/mine").value().has_value());

  ASSERT_EQ(client.DeleteRange(key).value(), 1);
  WriteBatch late;
  late.kv = {{"late", "2"}};
  Status status = (*store)->Commit(late);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("fenced"), std::string::npos) << status.ToString();
  EXPECT_EQ(fenced_calls.load(), 1);
  EXPECT_FALSE((*store)->GetKv("late").value().has_value());
}

TEST_F(EtcdStoreTest, OpenFailsWhenNoEndpointAnswers) {
  EtcdStoreOptions options;
  options.endpoints = {"127.0.0.1:1"};
  options.deadline_ms = 300;
  auto store = EtcdStore::Open(options);
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(store.status().message().find("127.0.0.1:1"), std::string::npos);
}

}  // namespace
}  // namespace tessera
