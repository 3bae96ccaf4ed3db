// `tessera store migrate`'s work on a real etcd: a populated SQLite store copied into an
// empty prefix of the shared 3-member cluster, then read back through a fresh EtcdStore.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <limits>
#include <string>

#include "store/etcd/etcd_store.h"
#include "store/etcd/testing/etcd_cluster.h"
#include "store/sqlite_store.h"
#include "store/store_migrate.h"
#include "store/testing/sample_rows.h"

namespace tessera {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

StatusOr<std::unique_ptr<EtcdStore>> OpenPrefix(const std::string& prefix) {
  TESSERA_ASSIGN_OR_RETURN(testing::EtcdCluster * cluster, testing::SharedEtcdCluster());
  EtcdStoreOptions options;
  options.endpoints = cluster->EndpointList();
  options.prefix = prefix;
  options.max_txn_ops = 10000;  // as the test cluster runs
  return EtcdStore::Open(std::move(options));
}

TEST(EtcdMigrateTest, APopulatedSqliteStoreArrivesInEtcdRowForRow) {
  std::string dir = ::testing::TempDir() + "tessera-etcd-migrate-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto from = OpenSqliteStore(dir + "/state.db");
  ASSERT_TRUE(from.ok()) << from.status().ToString();
  PopulateSampleRows(**from);
  const std::string prefix = "/test/migrate/" + std::to_string(::getpid()) + "/";
  {
    auto to = OpenPrefix(prefix);
    ASSERT_TRUE(to.ok()) << to.status().ToString();
    MigrateOptions options;
    options.batch_rows = 100;
    StatusOr<MigrateCounts> counts = MigrateStore(**from, **to, options);
    ASSERT_TRUE(counts.ok()) << counts.status().ToString();
    EXPECT_EQ(counts->jobs, 250u);
    EXPECT_EQ(counts->usage, 400u);
    EXPECT_EQ(counts->tokens, 4u);
    EXPECT_EQ(counts->kv, 3u);
    // A second run into the now populated prefix is refused.
    EXPECT_EQ(MigrateStore(**from, **to).status().code(), StatusCode::kFailedPrecondition);
  }
  // A fresh store on the prefix (as a controller starting on it) sees every row.
  auto again = OpenPrefix(prefix);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->LoadJobs().value(), (*from)->LoadJobs().value());
  EXPECT_EQ((*again)->LoadUsage(kMin, kMax).value(), (*from)->LoadUsage(kMin, kMax).value());
  EXPECT_EQ((*again)->LoadTokens().value(), (*from)->LoadTokens().value());
  EXPECT_EQ((*again)->ListKv("").value(), (*from)->ListKv("").value());
  EXPECT_EQ((*again)->GetKv("queues").value(), std::optional<std::string>("cohorts: []"));
  // The idempotency index came along: a key reused by another job is still refused.
  JobRow clash = (*again)->LoadJob(1).value().value();
  clash.id = 999;
  WriteBatch batch;
  batch.jobs.push_back(clash);
  EXPECT_EQ((*again)->Commit(std::move(batch)).code(), StatusCode::kAlreadyExists);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
