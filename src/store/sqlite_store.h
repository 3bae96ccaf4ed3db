// SqliteStore: the embedded, durable Store on one SQLite file.
//
// Layout: WAL journal mode, busy_timeout, a schema_version table and numbered migrations
// (a database newer than this binary is refused with FailedPrecondition; a file that is not
// a database, or a SQLite database of another program, too). Tables: jobs (indexed by state,
// unique (tenant, idempotency_key) where the key is not empty), usage (append only, indexed
// by end), tokens, kv.
// Group commit (store/group_commit.h): Commit hands its batch to one committer thread and
// waits. The committer takes every batch waiting (up to max_group), writes them in one
// transaction (each batch in its own savepoint, so a batch that breaks a constraint fails
// alone and leaves no trace), commits once (one fsync), then wakes the callers. A failing
// transaction (COMMIT, I/O) fails every caller of that group, and nothing of the group is
// applied.
// Reads use a second connection: they see exactly the batches whose Commit returned OK.
// Errors: constraint -> AlreadyExists, busy/locked/I/O -> Unavailable, disk full ->
// ResourceExhausted, not a database/corrupt/newer schema -> FailedPrecondition.
// Thread safety: all public methods are thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "base/mutex.h"
#include "store/group_commit.h"
#include "store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tessera {

struct SqliteStoreOptions {
  // true: synchronous=FULL, durable against power loss (the WAL is fsynced per transaction).
  // false: synchronous=NORMAL, durable against a process crash (WAL mode), not power loss.
  bool fsync = true;
  // Batches per transaction at most. Default 4096.
  size_t max_group = 4096;
  // How long a connection waits for a lock held by another connection. Default 5000 ms.
  int busy_timeout_ms = 5000;
};

// The schema version this binary writes.
inline constexpr int kSqliteSchemaVersion = 4;

class SqliteStore final : public Store {
 public:
  // Opens or creates the database at `path`, migrating it to kSqliteSchemaVersion.
  static StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                     SqliteStoreOptions options = {});
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Status Commit(WriteBatch batch) override;
  StatusOr<std::vector<JobRow>> LoadJobs() override;
  StatusOr<std::optional<JobRow>> LoadJob(uint64_t id) override;
  StatusOr<std::vector<UsageRow>> LoadUsage(int64_t since_us, int64_t until_us) override;
  StatusOr<std::vector<JobRow>> LoadJobsPage(uint64_t after_id, int64_t submit_since_us,
                                             int64_t submit_until_us, size_t limit) override;
  StatusOr<std::vector<UsageRow>> LoadUsageOfJobs(uint64_t first_job, uint64_t last_job) override;
  StatusOr<std::vector<TokenRow>> LoadTokens() override;
  StatusOr<std::optional<std::string>> GetKv(std::string_view key) override;
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListKv(
      std::string_view prefix) override;
  Status Close() override;

  // Transactions committed so far (for tests and benchmarks of group commit).
  uint64_t transactions() const { return transactions_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

 private:
  struct Statements;

  SqliteStore(std::string path, SqliteStoreOptions options);
  Status Init();
  // Writes one group in one transaction (group_commit_'s thread) and sets each write's
  // status; the transaction's error when it failed (then nothing of the group is applied).
  Status WriteGroup(std::span<GroupCommit::Write* const> group);
  Status ApplyBatch(const WriteBatch& batch);

  const std::string path_;
  const SqliteStoreOptions options_;
  sqlite3* writer_ = nullptr;  // used by Init, then the committer thread only, then Close
  Mutex read_mu_;
  sqlite3* reader_ PT_GUARDED_BY(read_mu_) = nullptr;  // set by Init, closed by Close
  std::unique_ptr<Statements> write_stmts_;
  std::unique_ptr<Statements> read_stmts_ PT_GUARDED_BY(read_mu_);

  std::unique_ptr<GroupCommit> group_commit_;  // set once Init has succeeded
  std::atomic<uint64_t> transactions_{0};

  Mutex close_mu_;  // serialises Close
  bool closed_ GUARDED_BY(close_mu_) = false;
  Status close_status_ GUARDED_BY(close_mu_);
};

// Opens the SQLite store (see SqliteStore::Open).
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                 SqliteStoreOptions options = {});

}  // namespace tessera
