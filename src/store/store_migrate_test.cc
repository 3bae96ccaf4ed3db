// MigrateStore: a populated SQLite store into an empty store, row for row.
#include "store/store_migrate.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <limits>
#include <string>

#include "store/sqlite_store.h"
#include "store/testing/sample_rows.h"

namespace tessera {
namespace {

class StoreMigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "tessera-migrate-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(StoreMigrateTest, EveryJobUsageTokenAndKvRowArrivesAsItWas) {
  auto from = OpenSqliteStore(dir_ + "/state.db");
  ASSERT_TRUE(from.ok()) << from.status().ToString();
  PopulateSampleRows(**from);
  InMemoryStore to;
  int progress_calls = 0;
  MigrateCounts last;
  MigrateOptions options;
  options.batch_rows = 64;
  options.progress = [&](const MigrateCounts& c) {
    ++progress_calls;
    EXPECT_GE(c.jobs + c.usage + c.tokens + c.kv, last.jobs + last.usage + last.tokens + last.kv);
    last = c;
  };
  StatusOr<MigrateCounts> counts = MigrateStore(**from, to, options);
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(counts->jobs, 250u);
  EXPECT_EQ(counts->usage, 400u);
  EXPECT_EQ(counts->tokens, 4u);
  EXPECT_EQ(counts->kv, 3u);
  EXPECT_EQ(progress_calls, (250 + 400 + 4 + 3 + 63) / 64);
  EXPECT_EQ(to.commits(), static_cast<uint64_t>(progress_calls));

  // Row for row, and the idempotency keys still name their jobs.
  EXPECT_EQ(to.LoadJobs().value(), (*from)->LoadJobs().value());
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(to.LoadUsage(kMin, kMax).value(), (*from)->LoadUsage(kMin, kMax).value());
  EXPECT_EQ(to.LoadTokens().value(), (*from)->LoadTokens().value());
  EXPECT_EQ(to.ListKv("").value(), (*from)->ListKv("").value());
  WriteBatch duplicate;
  JobRow clash = to.LoadJob(1).value().value();  // key-0 of team-a
  clash.id = 999;
  duplicate.jobs.push_back(clash);
  EXPECT_EQ(to.Commit(std::move(duplicate)).code(), StatusCode::kAlreadyExists);
}

TEST_F(StoreMigrateTest, APopulatedDestinationIsRefusedAndLeftAlone) {
  auto from = OpenSqliteStore(dir_ + "/state.db");
  ASSERT_TRUE(from.ok());
  PopulateSampleRows(**from);
  InMemoryStore to;
  WriteBatch one;
  one.kv = {{"cluster/id", "other"}};
  ASSERT_TRUE(to.Commit(std::move(one)).ok());
  StatusOr<MigrateCounts> counts = MigrateStore(**from, to);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(counts.status().message().find("not empty"), std::string::npos);
  EXPECT_TRUE(to.LoadJobs().value().empty());
  EXPECT_EQ(to.commits(), 1u);
}

TEST_F(StoreMigrateTest, AFailingDestinationStopsTheMigrationWithItsError) {
  auto from = OpenSqliteStore(dir_ + "/state.db");
  ASSERT_TRUE(from.ok());
  PopulateSampleRows(**from);
  InMemoryStore to;
  MigrateOptions options;
  options.batch_rows = 100;
  int batches = 0;
  options.progress = [&](const MigrateCounts&) {
    if (++batches == 2) {
      to.InjectCommitError(UnavailableError("etcd: no quorum"));
    }
  };
  StatusOr<MigrateCounts> counts = MigrateStore(**from, to, options);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(batches, 2);
}

}  // namespace
}  // namespace tessera
