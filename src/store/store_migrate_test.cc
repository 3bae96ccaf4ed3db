// MigrateStore: a populated SQLite store into an empty store, row for row.
#include "store/store_migrate.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <limits>
#include <string>

#include "store/sqlite_store.h"

namespace tessera {
namespace {

// A SQLite store with every kind of row: 250 jobs in every state (some keyed), 400
// usage intervals (some open), tokens of each role, queue configuration and metadata.
void Populate(Store& store) {
  for (int b = 0; b < 5; ++b) {
    WriteBatch batch;
    for (int i = 0; i < 50; ++i) {
      const int n = b * 50 + i;
      JobRow job;
      job.id = static_cast<uint64_t>(n + 1);
      job.tenant = n % 2 == 0 ? "team-a" : "team-b";
      job.queue = job.tenant;
      job.name = "job-" + std::to_string(n);
      job.idempotency_key = n % 3 == 0 ? "key-" + std::to_string(n) : "";
      job.spec_json = R"({"name":"job-)" + std::to_string(n) + R"("})";
      job.state = std::string(kJobStates[static_cast<size_t>(n) % kJobStates.size()]);
      job.submit_us = 1'000'000 + n;
      job.start_us = job.state == "pending" ? 0 : 2'000'000 + n;
      job.attempts = n % 4;
      job.preemptions = n % 2;
      job.exit_code = job.state == "failed" ? 3 : 0;
      job.reason = job.state == "failed" ? "exit 3" : "";
      job.placement_json = job.state == "running" ? R"({"node":"a","gpus":[0]})" : "";
      job.progress_us = n * 10;
      batch.jobs.push_back(job);
    }
    for (int i = 0; i < 80; ++i) {
      const int n = b * 80 + i;
      UsageRow u;
      u.job = static_cast<uint64_t>(n % 250 + 1);
      u.tenant = n % 2 == 0 ? "team-a" : "team-b";
      u.queue = u.tenant;
      u.start_us = 5'000'000 - n * 1000;  // not in insertion order
      u.end_us = n % 7 == 0 ? 0 : u.start_us + 500;
      u.gpu_milli = 1000 * (1 + n % 8);
      u.used_gpu_milli = n % 5 == 0 ? -1 : u.gpu_milli / 2;
      batch.usage.push_back(u);
    }
    ASSERT_TRUE(store.Commit(std::move(batch)).ok());
  }
  WriteBatch rest;
  rest.tokens = {{"hash-admin", "admin", "", "admin.token", 1},
                 {"hash-a", "tenant", "team-a", "a", 2},
                 {"hash-node", "node", "", "node-1", 3}};
  rest.kv = {{"queues", "cohorts: []"}, {"cluster/id", "abc"}, {"validation/x", "{}"}};
  ASSERT_TRUE(store.Commit(std::move(rest)).ok());
}

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
  Populate(**from);
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
  EXPECT_EQ(counts->tokens, 3u);
  EXPECT_EQ(counts->kv, 3u);
  EXPECT_EQ(progress_calls, (250 + 400 + 3 + 3 + 63) / 64);
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
  Populate(**from);
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
  Populate(**from);
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
