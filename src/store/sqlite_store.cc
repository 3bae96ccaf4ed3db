// SqliteStore: see sqlite_store.h.
#include "base/mutex.h"
#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sqlite_schema.h"

namespace tessera {
namespace {

using namespace sqlite_schema;  // NOLINT: the schema and statements of this file

Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return AlreadyExistsError(std::move(message));
      }
      return InvalidArgumentError(std::move(message));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return UnavailableError(std::move(message));
    case SQLITE_FULL:
      return ResourceExhaustedError(std::move(message));
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return FailedPreconditionError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

struct StmtDeleter {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

Status Prepare(sqlite3* db, std::string_view sql, Stmt* out) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(raw);
    return SqliteError(db, rc, "prepare");
  }
  out->reset(raw);
  return Status::Ok();
}

// Resets a statement (and drops its bindings) when it goes out of scope.
class ScopedReset {
 public:
  explicit ScopedReset(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~ScopedReset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  ScopedReset(const ScopedReset&) = delete;
  ScopedReset& operator=(const ScopedReset&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

// Bindings borrow the caller's bytes (SQLITE_STATIC, i.e. a null destructor): the
// statement is reset and its bindings cleared before the bytes go away.
void BindText(sqlite3_stmt* stmt, int index, std::string_view text) {
  sqlite3_bind_text64(stmt, index, text.data(), text.size(), nullptr, SQLITE_UTF8);
}
void BindBlob(sqlite3_stmt* stmt, int index, std::string_view bytes) {
  // A zero-length blob must not bind as NULL (the column is NOT NULL).
  sqlite3_bind_blob64(stmt, index, bytes.empty() ? "" : bytes.data(), bytes.size(), nullptr);
}
void BindInt(sqlite3_stmt* stmt, int index, int64_t value) {
  sqlite3_bind_int64(stmt, index, value);
}

std::string ColumnText(sqlite3_stmt* stmt, int column) {
  const unsigned char* text = sqlite3_column_text(stmt, column);
  if (text == nullptr) {
    return {};
  }
  return {reinterpret_cast<const char*>(text),
          static_cast<size_t>(sqlite3_column_bytes(stmt, column))};
}
std::string ColumnBlob(sqlite3_stmt* stmt, int column) {
  const void* data = sqlite3_column_blob(stmt, column);
  if (data == nullptr) {
    return {};
  }
  return {static_cast<const char*>(data), static_cast<size_t>(sqlite3_column_bytes(stmt, column))};
}
int64_t ColumnInt(sqlite3_stmt* stmt, int column) { return sqlite3_column_int64(stmt, column); }
int32_t ColumnInt32(sqlite3_stmt* stmt, int column) { return sqlite3_column_int(stmt, column); }

// Runs a statement that returns no rows.
Status Run(sqlite3* db, sqlite3_stmt* stmt, std::string_view what) {
  ScopedReset reset(stmt);
  int rc = sqlite3_step(stmt);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    return SqliteError(db, rc, what);
  }
  return Status::Ok();
}

// Runs SQL text (one or more statements, no parameters).
Status Exec(sqlite3* db, const char* sql, std::string_view what) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteError(db, rc, what);
  }
  return Status::Ok();
}

// The first column of the first row of `sql`, as an integer (0 when there is no row).
StatusOr<int64_t> QueryInt(sqlite3* db, std::string_view sql) {
  Stmt stmt;
  TESSERA_RETURN_IF_ERROR(Prepare(db, sql, &stmt));
  int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_ROW) {
    return ColumnInt(stmt.get(), 0);
  }
  if (rc == SQLITE_DONE) {
    return int64_t{0};
  }
  return SqliteError(db, rc, std::string(sql));
}

// Opens one connection with the store's settings.
StatusOr<sqlite3*> OpenConnection(const std::string& path, const SqliteStoreOptions& options) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status status = SqliteError(db, rc, "open " + path);
    sqlite3_close(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  // journal_mode reads the file header first: a file that is not a database fails here.
  Stmt wal;
  Status status = Prepare(db, "PRAGMA journal_mode = WAL", &wal);
  if (status.ok()) {
    rc = sqlite3_step(wal.get());
    if (rc != SQLITE_ROW) {
      status = SqliteError(db, rc, "set journal mode");
    } else if (ColumnText(wal.get(), 0) != "wal") {
      status = FailedPreconditionError("cannot use WAL journal mode (got '" +
                                       ColumnText(wal.get(), 0) + "')");
    }
  }
  wal.reset();
  if (status.ok()) {
    status = Exec(db, options.fsync ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL",
                  "set synchronous");
  }
  if (!status.ok()) {
    sqlite3_close(db);
    return Status(status.code(), "cannot open store " + path + ": " + status.message());
  }
  return db;
}

// Creates or migrates the schema, in one transaction.
Status Migrate(sqlite3* db, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", path + ": begin migration"));
  auto fail = [db](Status status) {
    static_cast<void>(Exec(db, "ROLLBACK", "rollback"));
    return status;
  };
  auto application_id = QueryInt(db, "PRAGMA application_id");
  if (!application_id.ok()) {
    return fail(application_id.status());
  }
  auto objects = QueryInt(db, "SELECT count(*) FROM sqlite_master");
  if (!objects.ok()) {
    return fail(objects.status());
  }
  if (*application_id != kApplicationId && (*application_id != 0 || *objects != 0)) {
    return fail(FailedPreconditionError(
        path + ": a SQLite database of another program, not a Tessera store (application_id " +
        std::to_string(*application_id) + ")"));
  }
  Status status = Exec(db,
                       "CREATE TABLE IF NOT EXISTS schema_version ("
                       "id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
                       "create schema_version");
  if (!status.ok()) {
    return fail(status);
  }
  auto version = QueryInt(db, "SELECT version FROM schema_version WHERE id = 1");
  if (!version.ok()) {
    return fail(version.status());
  }
  if (*version > kSqliteSchemaVersion) {
    return fail(
        FailedPreconditionError(path + ": store schema version " + std::to_string(*version) +
                                " is newer than this binary supports (" +
                                std::to_string(kSqliteSchemaVersion) + "); upgrade tessera"));
  }
  for (const Migration& migration : kMigrations) {
    if (migration.version <= *version) {
      continue;
    }
    status = Exec(db, migration.sql, "migration " + std::to_string(migration.version));
    if (!status.ok()) {
      return fail(status);
    }
  }
  std::string finish =
      "INSERT INTO schema_version (id, version) VALUES (1, " +
      std::to_string(kSqliteSchemaVersion) +
      ") ON CONFLICT (id) DO UPDATE SET version = excluded.version; PRAGMA application_id = " +
      std::to_string(kApplicationId) + ";";
  status = Exec(db, finish.c_str(), "record schema version");
  if (!status.ok()) {
    return fail(status);
  }
  status = Exec(db, "COMMIT", path + ": commit migration");
  if (!status.ok()) {
    return fail(status);
  }
  return Status::Ok();
}

Status ClosedError() { return FailedPreconditionError("store is closed"); }

}  // namespace

struct SqliteStore::Statements {
  // Writer.
  Stmt begin, commit, rollback, savepoint, release, rollback_to;
  Stmt upsert_job, insert_usage, upsert_token, upsert_kv;
  // Reader.
  Stmt load_jobs, load_job, load_usage, load_jobs_page, load_usage_of_jobs, load_tokens, get_kv,
      list_kv;
};

SqliteStore::SqliteStore(std::string path, SqliteStoreOptions options)
    : path_(std::move(path)), options_(options) {}

SqliteStore::~SqliteStore() { static_cast<void>(Close()); }

StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                         SqliteStoreOptions options) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) {
    return InvalidArgumentError("store path must name a file, got '" + path +
                                "' (use InMemoryStore for a store in memory)");
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(path, options));
  TESSERA_RETURN_IF_ERROR(store->Init());
  return store;
}

Status SqliteStore::Init() {
  TESSERA_ASSIGN_OR_RETURN(writer_, OpenConnection(path_, options_));
  TESSERA_RETURN_IF_ERROR(Migrate(writer_, path_));
  write_stmts_ = std::make_unique<Statements>();
  Statements& w = *write_stmts_;
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, "BEGIN IMMEDIATE", &w.begin));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, "COMMIT", &w.commit));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, "ROLLBACK", &w.rollback));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, "SAVEPOINT batch", &w.savepoint));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, "RELEASE batch", &w.release));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, "ROLLBACK TO batch", &w.rollback_to));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, kUpsertJobSql, &w.upsert_job));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, kInsertUsageSql, &w.insert_usage));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, kUpsertTokenSql, &w.upsert_token));
  TESSERA_RETURN_IF_ERROR(Prepare(writer_, kUpsertKvSql, &w.upsert_kv));

  MutexLock read_lock(read_mu_);  // nothing reads yet; the readers' lock for the analysis
  TESSERA_ASSIGN_OR_RETURN(reader_, OpenConnection(path_, options_));
  TESSERA_RETURN_IF_ERROR(Exec(reader_, "PRAGMA query_only = 1", "reader"));
  read_stmts_ = std::make_unique<Statements>();
  Statements& r = *read_stmts_;
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kLoadJobsSql, &r.load_jobs));
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kLoadJobSql, &r.load_job));
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kLoadUsageSql, &r.load_usage));
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kLoadJobsPageSql, &r.load_jobs_page));
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kLoadUsageOfJobsSql, &r.load_usage_of_jobs));
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kLoadTokensSql, &r.load_tokens));
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kGetKvSql, &r.get_kv));
  TESSERA_RETURN_IF_ERROR(Prepare(reader_, kListKvSql, &r.list_kv));

  GroupCommit::Options group_options;
  group_options.max_group = options_.max_group;
  group_commit_ = std::make_unique<GroupCommit>(
      [this](std::span<GroupCommit::Write* const> group) { return WriteGroup(group); },
      group_options);
  return Status::Ok();
}

Status SqliteStore::Commit(WriteBatch batch) {
  TESSERA_RETURN_IF_ERROR(ValidateBatch(batch));
  return group_commit_->Commit(batch);
}

Status SqliteStore::WriteGroup(std::span<GroupCommit::Write* const> group) {
  Statements& w = *write_stmts_;
  Status tx = Run(writer_, w.begin.get(), "begin");
  for (size_t i = 0; tx.ok() && i < group.size(); ++i) {
    tx = Run(writer_, w.savepoint.get(), "savepoint");
    if (!tx.ok()) {
      break;
    }
    Status batch = ApplyBatch(*group[i]->batch);
    if (!batch.ok()) {
      tx = Run(writer_, w.rollback_to.get(), "rollback to savepoint");
    }
    if (tx.ok()) {
      tx = Run(writer_, w.release.get(), "release savepoint");
    }
    group[i]->status = std::move(batch);
  }
  if (tx.ok()) {
    tx = Run(writer_, w.commit.get(), "commit");
  }
  if (tx.ok()) {
    transactions_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }
  if (sqlite3_get_autocommit(writer_) == 0) {
    static_cast<void>(Run(writer_, w.rollback.get(), "rollback"));
  }
  // GroupCommit hands this to every batch of the group that did not fail alone.
  return Status(tx.code(), "transaction of " + std::to_string(group.size()) +
                               " batch(es) failed, nothing applied: " + tx.message());
}

Status SqliteStore::ApplyBatch(const WriteBatch& batch) {
  Statements& w = *write_stmts_;
  for (const JobRow& job : batch.jobs) {
    sqlite3_stmt* s = w.upsert_job.get();
    ScopedReset reset(s);
    BindInt(s, 1, static_cast<int64_t>(job.id));
    BindText(s, 2, job.tenant);
    BindText(s, 3, job.queue);
    BindText(s, 4, job.name);
    BindText(s, 5, job.idempotency_key);
    BindText(s, 6, job.spec_json.str());
    BindText(s, 7, job.state);
    BindInt(s, 8, job.submit_us);
    BindInt(s, 9, job.start_us);
    BindInt(s, 10, job.end_us);
    BindInt(s, 11, job.attempts);
    BindInt(s, 12, job.preemptions);
    BindInt(s, 13, job.exit_code);
    BindText(s, 14, job.reason);
    BindText(s, 15, job.placement_json);
    BindInt(s, 16, job.progress_us);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_CONSTRAINT_UNIQUE) {
      return AlreadyExistsError("job " + std::to_string(job.id) + ": tenant '" + job.tenant +
                                "' already has a job with idempotency key '" + job.idempotency_key +
                                "'");
    }
    if (rc != SQLITE_DONE) {
      return SqliteError(writer_, rc, "write job " + std::to_string(job.id));
    }
  }
  for (const UsageRow& usage : batch.usage) {
    sqlite3_stmt* s = w.insert_usage.get();
    BindInt(s, 1, static_cast<int64_t>(usage.job));
    BindText(s, 2, usage.tenant);
    BindText(s, 3, usage.queue);
    BindInt(s, 4, usage.start_us);
    BindInt(s, 5, usage.end_us);
    BindInt(s, 6, usage.gpu_milli);
    BindInt(s, 7, usage.used_gpu_milli);
    TESSERA_RETURN_IF_ERROR(Run(writer_, s, "write usage"));
  }
  for (const TokenRow& token : batch.tokens) {
    sqlite3_stmt* s = w.upsert_token.get();
    BindText(s, 1, token.hash);
    BindText(s, 2, token.role);
    BindText(s, 3, token.tenant);
    BindText(s, 4, token.name);
    BindInt(s, 5, token.created_us);
    BindText(s, 6, token.user);
    TESSERA_RETURN_IF_ERROR(Run(writer_, s, "write token"));
  }
  for (const auto& [key, value] : batch.kv) {
    sqlite3_stmt* s = w.upsert_kv.get();
    BindText(s, 1, key);
    BindBlob(s, 2, value);
    TESSERA_RETURN_IF_ERROR(Run(writer_, s, "write kv " + key));
  }
  return Status::Ok();
}

namespace {

// The current row of a kLoadJobsSql or kLoadJobSql statement.
JobRow ReadJobRow(sqlite3_stmt* s) {
  JobRow job;
  job.id = static_cast<uint64_t>(ColumnInt(s, 0));
  job.tenant = ColumnText(s, 1);
  job.queue = ColumnText(s, 2);
  job.name = ColumnText(s, 3);
  job.idempotency_key = ColumnText(s, 4);
  job.spec_json = ColumnText(s, 5);
  job.state = ColumnText(s, 6);
  job.submit_us = ColumnInt(s, 7);
  job.start_us = ColumnInt(s, 8);
  job.end_us = ColumnInt(s, 9);
  job.attempts = ColumnInt32(s, 10);
  job.preemptions = ColumnInt32(s, 11);
  job.exit_code = ColumnInt32(s, 12);
  job.reason = ColumnText(s, 13);
  job.placement_json = ColumnText(s, 14);
  job.progress_us = ColumnInt(s, 15);
  return job;
}

// An id or count as SQLite's integer (ids stay far below its maximum).
int64_t ClampedInt(uint64_t v) {
  return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
}

// The rows of a kLoadUsageSql or kLoadUsageOfJobsSql statement.
StatusOr<std::vector<UsageRow>> ReadUsageRows(sqlite3* db, sqlite3_stmt* s) {
  std::vector<UsageRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    UsageRow& usage = out.emplace_back();
    usage.job = static_cast<uint64_t>(ColumnInt(s, 0));
    usage.tenant = ColumnText(s, 1);
    usage.queue = ColumnText(s, 2);
    usage.start_us = ColumnInt(s, 3);
    usage.end_us = ColumnInt(s, 4);
    usage.gpu_milli = ColumnInt(s, 5);
    usage.used_gpu_milli = ColumnInt(s, 6);
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(db, rc, "load usage");
  }
  return out;
}

}  // namespace

StatusOr<std::vector<JobRow>> SqliteStore::LoadJobs() {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->load_jobs.get();
  ScopedReset reset(s);
  std::vector<JobRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back(ReadJobRow(s));
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(reader_, rc, "load jobs");
  }
  return out;
}

StatusOr<std::optional<JobRow>> SqliteStore::LoadJob(uint64_t id) {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->load_job.get();
  ScopedReset reset(s);
  sqlite3_bind_int64(s, 1, static_cast<int64_t>(id));
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    return std::optional<JobRow>(ReadJobRow(s));
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(reader_, rc, "load job");
  }
  return std::optional<JobRow>();
}

StatusOr<std::vector<UsageRow>> SqliteStore::LoadUsage(int64_t since_us, int64_t until_us) {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->load_usage.get();
  ScopedReset reset(s);
  BindInt(s, 1, since_us);
  BindInt(s, 2, until_us);
  return ReadUsageRows(reader_, s);
}

StatusOr<std::vector<JobRow>> SqliteStore::LoadJobsPage(uint64_t after_id,
                                                        int64_t submit_since_us,
                                                        int64_t submit_until_us, size_t limit) {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->load_jobs_page.get();
  ScopedReset reset(s);
  BindInt(s, 1, ClampedInt(after_id));
  BindInt(s, 2, submit_since_us);
  BindInt(s, 3, submit_until_us);
  BindInt(s, 4, limit == 0 ? -1 : ClampedInt(limit));  // SQLite: a negative LIMIT is none
  std::vector<JobRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back(ReadJobRow(s));
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(reader_, rc, "load a page of jobs");
  }
  return out;
}

StatusOr<std::vector<UsageRow>> SqliteStore::LoadUsageOfJobs(uint64_t first_job,
                                                             uint64_t last_job) {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->load_usage_of_jobs.get();
  ScopedReset reset(s);
  BindInt(s, 1, ClampedInt(first_job));
  BindInt(s, 2, ClampedInt(last_job));
  return ReadUsageRows(reader_, s);
}

StatusOr<std::vector<TokenRow>> SqliteStore::LoadTokens() {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->load_tokens.get();
  ScopedReset reset(s);
  std::vector<TokenRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    TokenRow& token = out.emplace_back();
    token.hash = ColumnText(s, 0);
    token.role = ColumnText(s, 1);
    token.tenant = ColumnText(s, 2);
    token.name = ColumnText(s, 3);
    token.created_us = ColumnInt(s, 4);
    token.user = ColumnText(s, 5);
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(reader_, rc, "load tokens");
  }
  return out;
}

StatusOr<std::optional<std::string>> SqliteStore::GetKv(std::string_view key) {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->get_kv.get();
  ScopedReset reset(s);
  BindText(s, 1, key);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    return std::optional<std::string>(ColumnBlob(s, 0));
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(reader_, rc, "get kv");
  }
  return std::optional<std::string>();
}

StatusOr<std::vector<std::pair<std::string, std::string>>> SqliteStore::ListKv(
    std::string_view prefix) {
  MutexLock lock(read_mu_);
  if (reader_ == nullptr) {
    return ClosedError();
  }
  sqlite3_stmt* s = read_stmts_->list_kv.get();
  ScopedReset reset(s);
  BindText(s, 1, prefix);
  std::vector<std::pair<std::string, std::string>> out;
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.emplace_back(ColumnBlob(s, 0), ColumnBlob(s, 1));
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(reader_, rc, "list kv");
  }
  return out;
}

Status SqliteStore::Close() {
  MutexLock close_lock(close_mu_);
  if (closed_) {
    return close_status_;
  }
  closed_ = true;
  if (group_commit_ != nullptr) {
    group_commit_->Stop();  // writes what is queued; later Commits are refused
  }
  {
    MutexLock lock(read_mu_);
    read_stmts_.reset();
    if (reader_ != nullptr) {
      int rc = sqlite3_close(reader_);
      if (rc != SQLITE_OK && close_status_.ok()) {
        close_status_ = SqliteError(nullptr, rc, "close reader");
      }
      reader_ = nullptr;
    }
  }
  write_stmts_.reset();
  if (writer_ != nullptr) {
    // Fold the WAL into the database file so that it stands alone; best effort (another
    // process may be reading).
    static_cast<void>(Exec(writer_, "PRAGMA wal_checkpoint(TRUNCATE)", "checkpoint"));
    int rc = sqlite3_close(writer_);
    if (rc != SQLITE_OK && close_status_.ok()) {
      close_status_ = SqliteError(nullptr, rc, "close");
    }
    writer_ = nullptr;
  }
  return close_status_;
}

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                 SqliteStoreOptions options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> store, SqliteStore::Open(path, options));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace tessera
