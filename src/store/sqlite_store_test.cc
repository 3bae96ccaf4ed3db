// Tests of what only the SQLite store does: group commit, durability across reopen and
// crash, schema versions, and refusing files that are not Tessera stores.
#include "store/sqlite_store.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/testing/temp_dir.h"

namespace tessera {
// Named, not anonymous: its MakeJob would meet store_contract's in a unity batch.
namespace sqlite_store_test {

JobRow MakeJob(uint64_t id, std::string tenant = "team-a", std::string key = "") {
  JobRow job;
  job.id = id;
  job.tenant = std::move(tenant);
  job.queue = "research";
  job.name = "job-" + std::to_string(id);
  job.idempotency_key = std::move(key);
  job.spec_json = R"({"gpus":1})";
  job.state = "pending";
  job.submit_us = static_cast<int64_t>(id) * 10;
  return job;
}

// Runs SQL on the file directly, outside the store.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

// The first column of the first row, as text ("" when there is none).
std::string RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      out = text != nullptr ? reinterpret_cast<const char*>(text) : "";
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return out;
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }

  std::unique_ptr<SqliteStore> OpenOrDie(SqliteStoreOptions options = {}) {
    auto store = SqliteStore::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  testing::TempDir dir_{"tessera_store_"};
  std::string path_ = dir_.File("tessera.db");
};

TEST_F(SqliteStoreTest, CreatesTheSchema) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->path(), path_);
  ASSERT_TRUE(store->Close().ok());
  EXPECT_EQ(RawQuery(path_, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQuery(path_, "SELECT version FROM schema_version"),
            std::to_string(kSqliteSchemaVersion));
  EXPECT_EQ(RawQuery(path_,
                     "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                     "name IN ('jobs_by_state', 'jobs_by_idempotency_key')"),
            "2");
}

TEST_F(SqliteStoreTest, GroupCommitGroupsConcurrentCommits) {
  SqliteStoreOptions options;
  options.fsync = true;
  auto store = OpenOrDie(options);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 16;
  constexpr int kPerThread = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, &failures, t] {
      for (int i = 0; i < kPerThread; ++i) {
        WriteBatch batch;
        batch.jobs = {MakeJob(static_cast<uint64_t>(t * kPerThread + i + 1))};
        if (!store->Commit(std::move(batch)).ok()) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  constexpr uint64_t kCommits = kThreads * kPerThread;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->LoadJobs().value().size(), kCommits);
  uint64_t transactions = store->transactions();
  EXPECT_GE(transactions, 1u);
  EXPECT_LE(transactions * 4, kCommits)
      << transactions << " transactions for " << kCommits << " commits";
  std::cerr << "group commit: " << kCommits << " commits in " << transactions << " transactions\n";
}

TEST_F(SqliteStoreTest, MaxGroupOfOneWritesOneTransactionPerCommit) {
  SqliteStoreOptions options;
  options.fsync = false;
  options.max_group = 1;
  auto store = OpenOrDie(options);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < kPerThread; ++i) {
        WriteBatch batch;
        batch.jobs = {MakeJob(static_cast<uint64_t>(t * kPerThread + i + 1))};
        EXPECT_TRUE(store->Commit(std::move(batch)).ok());
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(store->transactions(), static_cast<uint64_t>(kThreads * kPerThread));
}

TEST_F(SqliteStoreTest, BadBatchFailsAloneInsideAGroup) {
  SqliteStoreOptions options;
  options.fsync = true;  // slow transactions, so that commits pile up into groups
  auto store = OpenOrDie(options);
  ASSERT_NE(store, nullptr);
  WriteBatch seed;
  seed.jobs = {MakeJob(1, "team-a", "taken")};
  ASSERT_TRUE(store->Commit(seed).ok());

  constexpr int kThreads = 8;
  constexpr int kPerThread = 30;
  std::atomic<int> good_failed{0};
  std::atomic<int> bad_passed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        uint64_t id = static_cast<uint64_t>(1000 + t * kPerThread + i);
        WriteBatch batch;
        bool bad = t % 2 == 1;
        // A bad batch writes a usage row and a job first, then breaks the key constraint.
        batch.usage = {UsageRow{id, "team-a", "q", 1, 2, 1}};
        batch.jobs = {MakeJob(id), MakeJob(id + 100000, "team-a", bad ? "taken" : "")};
        Status status = store->Commit(std::move(batch));
        if (bad && status.code() != StatusCode::kAlreadyExists) {
          bad_passed.fetch_add(1);
        }
        if (!bad && !status.ok()) {
          good_failed.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(good_failed.load(), 0);
  EXPECT_EQ(bad_passed.load(), 0);
  auto jobs = store->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  // The seed plus two jobs of every good batch; nothing of the bad ones.
  EXPECT_EQ(jobs->size(), 1u + 2u * (kThreads / 2) * kPerThread);
  for (const JobRow& job : *jobs) {
    uint64_t base = job.id > 100000 ? job.id - 100000 : job.id;
    if (base >= 1000) {
      EXPECT_EQ((base - 1000) / kPerThread % 2, 0u) << "job " << job.id << " of a bad batch";
    }
  }
  EXPECT_EQ(store->LoadUsage(0, 10).value().size(), static_cast<size_t>(kThreads / 2) * kPerThread);
  EXPECT_LT(store->transactions(), 1u + kThreads * kPerThread);
}

TEST_F(SqliteStoreTest, ReopenKeepsEverything) {
  WriteBatch batch;
  JobRow job = MakeJob(9, "team-b", "once");
  job.placement_json = R"({"gpus":[3]})";
  batch.jobs = {job, MakeJob(10)};
  batch.usage = {UsageRow{9, "team-b", "q", 5, 15, 250}};
  batch.tokens = {TokenRow{"hash", "agent", "", "node-1", 77, ""}};
  batch.kv = {{"cluster", "uuid-1"}};
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Commit(batch).ok());
    ASSERT_TRUE(store->Close().ok());
  }
  for (int round = 0; round < 2; ++round) {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    auto jobs = store->LoadJobs();
    ASSERT_TRUE(jobs.ok());
    EXPECT_EQ(*jobs, batch.jobs);
    EXPECT_EQ(store->LoadUsage(0, 100).value(), batch.usage);
    EXPECT_EQ(store->LoadTokens().value(), batch.tokens);
    EXPECT_EQ(store->GetKv("cluster").value(), std::optional<std::string>("uuid-1"));
    // The unique index survives too.
    WriteBatch duplicate;
    duplicate.jobs = {MakeJob(11, "team-b", "once")};
    EXPECT_EQ(store->Commit(duplicate).code(), StatusCode::kAlreadyExists);
    // The destructor closes the store.
  }
}

TEST_F(SqliteStoreTest, OpenStoreFunctionReturnsAStore) {
  auto store = OpenSqliteStore(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  WriteBatch batch;
  batch.kv = {{"a", "b"}};
  EXPECT_TRUE((*store)->Commit(batch).ok());
  EXPECT_EQ((*store)->GetKv("a").value(), std::optional<std::string>("b"));
}

TEST_F(SqliteStoreTest, RefusesAFileThatIsNotADatabase) {
  {
    std::ofstream out(path_, std::ios::binary);
    for (int i = 0; i < 200; ++i) {
      out << "this is not a database, just some text. ";
    }
  }
  auto store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << store.status().ToString();
  EXPECT_NE(store.status().message().find("not a database"), std::string::npos)
      << store.status().ToString();
  EXPECT_NE(store.status().message().find(path_), std::string::npos) << store.status().ToString();
}

TEST_F(SqliteStoreTest, RefusesADatabaseOfAnotherProgram) {
  RawExec(path_, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)");
  auto store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("not a Tessera store"), std::string::npos)
      << store.status().ToString();
  // Nothing was added to it.
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM sqlite_master WHERE name = 'jobs'"), "0");
}

TEST_F(SqliteStoreTest, MigratesAVersion1StoreToIndexUsageByJob) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.jobs = {MakeJob(1)};
    batch.usage = {UsageRow{1, "team-a", "research", 10, 20, 500}};
    ASSERT_TRUE(store->Commit(batch).ok());
  }
  // As a version-1 binary left it: no usage_by_job (nor versions 3 and 4's columns).
  RawExec(path_,
          "ALTER TABLE usage DROP COLUMN used_gpu_milli; DROP INDEX usage_by_job; "
          "ALTER TABLE tokens DROP COLUMN user; UPDATE schema_version SET version = 1");
  auto store = SqliteStore::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->LoadUsageOfJobs(1, 1).value().size(), 1u);
  ASSERT_TRUE((*store)->Close().ok());
  EXPECT_EQ(RawQuery(path_, "SELECT version FROM schema_version"),
            std::to_string(kSqliteSchemaVersion));
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM sqlite_master WHERE name = 'usage_by_job'"),
            "1");
}

TEST_F(SqliteStoreTest, MigratesAVersion2StoreToKeepUsedGpuMilli) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.jobs = {MakeJob(1)};
    batch.usage = {UsageRow{1, "team-a", "research", 10, 20, 500}};
    ASSERT_TRUE(store->Commit(batch).ok());
  }
  // As a version-2 binary left it: intervals without what they used.
  RawExec(path_,
          "ALTER TABLE usage DROP COLUMN used_gpu_milli; ALTER TABLE tokens DROP COLUMN user; "
          "UPDATE schema_version SET version = 2");
  auto store = SqliteStore::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<UsageRow> rows = (*store)->LoadUsageOfJobs(1, 1).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].used_gpu_milli, -1);  // not measured
  WriteBatch batch;
  UsageRow measured{1, "team-a", "research", 20, 30, 500};
  measured.used_gpu_milli = 125;
  batch.usage = {measured};
  ASSERT_TRUE((*store)->Commit(batch).ok());
  rows = (*store)->LoadUsage(0, 100).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1], measured);
  ASSERT_TRUE((*store)->Close().ok());
  EXPECT_EQ(RawQuery(path_, "SELECT version FROM schema_version"),
            std::to_string(kSqliteSchemaVersion));
}

TEST_F(SqliteStoreTest, MigratesAVersion3StoreToKeepTokenUsers) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.tokens = {TokenRow{"h-old", "tenant", "team-a", "ci", 1, ""}};
    ASSERT_TRUE(store->Commit(batch).ok());
  }
  // As a version-3 binary left it: tokens without a user.
  RawExec(path_, "ALTER TABLE tokens DROP COLUMN user; UPDATE schema_version SET version = 3");
  auto store = SqliteStore::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<TokenRow> tokens = (*store)->LoadTokens().value();
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0], (TokenRow{"h-old", "tenant", "team-a", "ci", 1, ""}));
  WriteBatch batch;
  batch.tokens = {TokenRow{"h-new", "tenant", "team-a", "alice@team-a", 2, "alice"}};
  ASSERT_TRUE((*store)->Commit(batch).ok());
  tokens = (*store)->LoadTokens().value();
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].user, "alice");
  ASSERT_TRUE((*store)->Close().ok());
  EXPECT_EQ(RawQuery(path_, "SELECT version FROM schema_version"), "4");
}

TEST_F(SqliteStoreTest, RefusesANewerSchemaVersion) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.jobs = {MakeJob(1)};
    ASSERT_TRUE(store->Commit(batch).ok());
  }
  RawExec(path_, "UPDATE schema_version SET version = " + std::to_string(kSqliteSchemaVersion + 1));
  auto store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer"), std::string::npos) << store.status().ToString();
  // Refusing changed nothing.
  EXPECT_EQ(RawQuery(path_, "SELECT version FROM schema_version"),
            std::to_string(kSqliteSchemaVersion + 1));
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM jobs"), "1");
}

TEST_F(SqliteStoreTest, RefusesPathsThatAreNotFiles) {
  EXPECT_EQ(SqliteStore::Open("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SqliteStore::Open(":memory:").status().code(), StatusCode::kInvalidArgument);
  auto missing_dir = SqliteStore::Open(dir_.File("no/such/dir/tessera.db"));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.status().code(), StatusCode::kUnavailable)
      << missing_dir.status().ToString();
}

// The child commits batches from several threads and writes each acknowledged job id to
// the pipe; the parent kills it mid-flight, reopens the store and checks that every
// acknowledged batch is there, whole, exactly once.
void CrashTest(const std::string& path, bool fsync) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    SqliteStoreOptions options;
    options.fsync = fsync;
    auto store = SqliteStore::Open(path, options);
    if (!store.ok()) {
      _exit(2);
    }
    constexpr int kThreads = 4;
    constexpr uint64_t kMaxPerThread = 200000;  // bounds the child if nobody kills it
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&store, t, fd = fds[1]] {
        for (uint64_t i = 0; i < kMaxPerThread; ++i) {
          uint64_t id = i * kThreads + static_cast<uint64_t>(t) + 1;
          WriteBatch batch;
          batch.jobs = {MakeJob(id)};
          batch.usage = {UsageRow{id, "team-a", "research", 1, 2, 1000}};
          if (!(*store)->Commit(std::move(batch)).ok()) {
            _exit(3);
          }
          if (write(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
            _exit(4);
          }
        }
      });
    }
    for (std::thread& thread : threads) {
      thread.join();
    }
    _exit(0);
  }
  close(fds[1]);

  std::set<uint64_t> acked;
  std::string pending;  // bytes of a partly read id
  auto read_available = [&](int timeout_ms) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) {
      return true;
    }
    char buffer[4096];
    ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n <= 0) {
      return false;  // end of stream
    }
    pending.append(buffer, static_cast<size_t>(n));
    size_t whole = pending.size() / sizeof(uint64_t) * sizeof(uint64_t);
    for (size_t off = 0; off < whole; off += sizeof(uint64_t)) {
      uint64_t id;
      std::memcpy(&id, pending.data() + off, sizeof id);
      acked.insert(id);
    }
    pending.erase(0, whole);
    return true;
  };
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto kill_after = start + std::chrono::milliseconds(200);
  const auto give_up = start + std::chrono::seconds(20);
  bool open = true;
  // Read acks until 200 ms have passed and some acks came in (bounded by give_up).
  while (open && Clock::now() < give_up && (Clock::now() < kill_after || acked.empty())) {
    open = read_available(10);
  }
  kill(pid, SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  // Drain what the child wrote before it died.
  while (open && read_available(1000)) {
  }
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "the child ended on its own, status " << wstatus;
  ASSERT_FALSE(acked.empty()) << "the child acknowledged nothing in time";

  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  std::set<uint64_t> present;
  for (const JobRow& job : *jobs) {
    EXPECT_TRUE(present.insert(job.id).second) << "job " << job.id << " twice";
    EXPECT_EQ(job, MakeJob(job.id)) << "job " << job.id << " torn";
  }
  for (uint64_t id : acked) {
    EXPECT_TRUE(present.count(id) == 1) << "acknowledged job " << id << " lost";
  }
  // Batches are atomic across the crash: each job present has its usage row and only it.
  auto usage = (*store)->LoadUsage(0, 10);
  ASSERT_TRUE(usage.ok());
  std::multiset<uint64_t> usage_jobs;
  for (const UsageRow& row : *usage) {
    usage_jobs.insert(row.job);
  }
  EXPECT_EQ(usage_jobs, std::multiset<uint64_t>(present.begin(), present.end()));
  EXPECT_GE(present.size(), acked.size());
  std::cerr << "crash test (fsync=" << fsync << "): " << acked.size() << " acknowledged, "
            << present.size() << " present after the crash\n";
}

TEST_F(SqliteStoreTest, CrashKeepsEveryAcknowledgedCommitWithFsync) { CrashTest(path_, true); }

TEST_F(SqliteStoreTest, CrashKeepsEveryAcknowledgedCommitWithoutFsync) { CrashTest(path_, false); }

}  // namespace sqlite_store_test
}  // namespace tessera
