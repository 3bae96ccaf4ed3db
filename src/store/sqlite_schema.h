// The SQLite store's schema (its migrations) and the SQL of its prepared statements.
// Internal to SqliteStore (sqlite_store.cc); constants only.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "store/sqlite_store.h"

namespace tessera::sqlite_schema {

// PRAGMA application_id of a Tessera store ("TSRA").
constexpr int32_t kApplicationId = 0x54535241;

// Migration n brings the schema from version n-1 to n. Never edit a released entry; append.
struct Migration {
  int version;
  const char* sql;
};
constexpr std::array<Migration, 4> kMigrations = {{
    {1, R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  tenant TEXT NOT NULL,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL,
  submit_us INTEGER NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  preemptions INTEGER NOT NULL,
  exit_code INTEGER NOT NULL,
  reason TEXT NOT NULL,
  placement_json TEXT NOT NULL,
  progress_us INTEGER NOT NULL
);
CREATE UNIQUE INDEX jobs_by_idempotency_key ON jobs (tenant, idempotency_key)
  WHERE idempotency_key <> '';
CREATE INDEX jobs_by_state ON jobs (state);
CREATE TABLE usage (
  seq INTEGER PRIMARY KEY,
  job INTEGER NOT NULL,
  tenant TEXT NOT NULL,
  queue TEXT NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL,
  gpu_milli INTEGER NOT NULL
);
CREATE INDEX usage_by_end ON usage (end_us);
CREATE TABLE tokens (
  hash TEXT PRIMARY KEY,
  role TEXT NOT NULL,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  created_us INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE kv (
  key TEXT PRIMARY KEY,
  value BLOB NOT NULL
) WITHOUT ROWID;
)sql"},
    // A job's usage intervals without a scan (the history API's pages).
    {2, R"sql(
CREATE INDEX usage_by_job ON usage (job, start_us);
)sql"},
    // What an interval used of its GPUs (utilisation-weighted milli-GPU); -1: not measured.
    {3, R"sql(
ALTER TABLE usage ADD COLUMN used_gpu_milli INTEGER NOT NULL DEFAULT -1;
)sql"},
    // The person a token stands for inside its tenant; '': the tenant as a whole.
    {4, R"sql(
ALTER TABLE tokens ADD COLUMN user TEXT NOT NULL DEFAULT '';
)sql"},
}};
static_assert(kMigrations.size() == kSqliteSchemaVersion, "one migration per schema version");

constexpr std::string_view kUpsertJobSql = R"sql(
INSERT INTO jobs (id, tenant, queue, name, idempotency_key, spec_json, state, submit_us,
                  start_us, end_us, attempts, preemptions, exit_code, reason, placement_json,
                  progress_us)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
ON CONFLICT (id) DO UPDATE SET
  tenant = excluded.tenant, queue = excluded.queue, name = excluded.name,
  idempotency_key = excluded.idempotency_key, spec_json = excluded.spec_json,
  state = excluded.state, submit_us = excluded.submit_us, start_us = excluded.start_us,
  end_us = excluded.end_us, attempts = excluded.attempts, preemptions = excluded.preemptions,
  exit_code = excluded.exit_code, reason = excluded.reason,
  placement_json = excluded.placement_json, progress_us = excluded.progress_us
)sql";
constexpr std::string_view kInsertUsageSql =
    "INSERT INTO usage (job, tenant, queue, start_us, end_us, gpu_milli, used_gpu_milli) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
constexpr std::string_view kUpsertTokenSql =
    "INSERT INTO tokens (hash, role, tenant, name, created_us, user) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
    "ON CONFLICT (hash) DO UPDATE SET role = excluded.role, tenant = excluded.tenant, "
    "name = excluded.name, created_us = excluded.created_us, user = excluded.user";
constexpr std::string_view kUpsertKvSql =
    "INSERT INTO kv (key, value) VALUES (?1, ?2) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value";
constexpr std::string_view kLoadJobsSql =
    "SELECT id, tenant, queue, name, idempotency_key, spec_json, state, submit_us, start_us, "
    "end_us, attempts, preemptions, exit_code, reason, placement_json, progress_us "
    "FROM jobs ORDER BY id";
constexpr std::string_view kLoadJobSql =
    "SELECT id, tenant, queue, name, idempotency_key, spec_json, state, submit_us, start_us, "
    "end_us, attempts, preemptions, exit_code, reason, placement_json, progress_us "
    "FROM jobs WHERE id = ?1";
constexpr std::string_view kLoadUsageSql =
    "SELECT job, tenant, queue, start_us, end_us, gpu_milli, used_gpu_milli FROM usage "
    "WHERE start_us < ?2 AND (end_us > ?1 OR end_us = 0) ORDER BY start_us, seq";
constexpr std::string_view kLoadJobsPageSql =
    "SELECT id, tenant, queue, name, idempotency_key, spec_json, state, submit_us, start_us, "
    "end_us, attempts, preemptions, exit_code, reason, placement_json, progress_us "
    "FROM jobs WHERE id > ?1 AND submit_us >= ?2 AND submit_us < ?3 ORDER BY id LIMIT ?4";
constexpr std::string_view kLoadUsageOfJobsSql =
    "SELECT job, tenant, queue, start_us, end_us, gpu_milli, used_gpu_milli FROM usage "
    "WHERE job BETWEEN ?1 AND ?2 ORDER BY job, start_us, seq";
constexpr std::string_view kLoadTokensSql =
    "SELECT hash, role, tenant, name, created_us, user FROM tokens ORDER BY hash";
constexpr std::string_view kGetKvSql = "SELECT value FROM kv WHERE key = ?1";
// Keys from the prefix up to the prefix followed by the largest byte.
constexpr std::string_view kListKvSql =
    "SELECT key, value FROM kv WHERE key >= ?1 AND key < ?1 || x'ff' ORDER BY key";

}  // namespace tessera::sqlite_schema
