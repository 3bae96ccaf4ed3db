// Store: the controller's durable state, as plain rows.
//
// The controller keeps jobs in memory and persists every change through a Store. Rows are
// plain data with no scheduler types; JSON columns are opaque to the store. A WriteBatch is
// applied all or nothing. Commit returns OK only once the batch is durable (per the
// implementation's sync option); loads see every batch whose Commit has returned OK.
// Constraints checked by every implementation (ValidateBatch): job id != 0, job state is
// one of kJobStates, usage job != 0 and end_us == 0 or >= start_us, token hash and kv key
// not empty (all InvalidArgument); an idempotency key is unique per tenant when not empty
// (AlreadyExists).
// Thread safety: Store implementations are thread-safe; rows and batches are values.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/shared_text.h"
#include "base/status.h"

namespace tessera {

// The job states a JobRow may hold.
inline constexpr std::array<std::string_view, 6> kJobStates = {"pending",   "running", "stopping",
                                                               "succeeded", "failed",  "cancelled"};

struct JobRow {
  uint64_t id = 0;  // assigned by the controller (monotonic)
  std::string tenant, queue, name;
  std::string idempotency_key;                      // "" when none; unique per tenant when set
  SharedText spec_json;                             // the submission, opaque to the store
  std::string state;                                // one of kJobStates
  int64_t submit_us = 0, start_us = 0, end_us = 0;  // 0: not yet
  int32_t attempts = 0, preemptions = 0, exit_code = 0;
  std::string reason;          // why pending / why failed
  std::string placement_json;  // current allocation (opaque), "" when none
  int64_t progress_us = 0;     // work saved by the last checkpoint

  bool operator==(const JobRow&) const = default;
};

// One interval during which a job held gpu_milli. end_us == 0 marks an interval still open.
struct UsageRow {
  uint64_t job = 0;
  std::string tenant, queue;
  int64_t start_us = 0, end_us = 0;
  int64_t gpu_milli = 0;
  // What it used of them: gpu_milli x its GPUs' mean utilisation (sched/idle_watch.h);
  // -1: not measured (no telemetry, or a row from before schema version 3).
  int64_t used_gpu_milli = -1;

  bool operator==(const UsageRow&) const = default;
};

// An API token, by the hash of its secret; the secret itself is never stored.
struct TokenRow {
  std::string hash;
  std::string role;
  std::string tenant;
  std::string name;
  int64_t created_us = 0;
  // The person it stands for inside `tenant` (a tenant token); "": the tenant as a whole.
  std::string user = "";

  bool operator==(const TokenRow&) const = default;
};

struct WriteBatch {
  std::vector<JobRow> jobs;                             // upserts by id
  std::vector<UsageRow> usage;                          // appends
  std::vector<TokenRow> tokens;                         // upserts by hash
  std::vector<std::pair<std::string, std::string>> kv;  // upserts (queue config, cluster metadata)

  bool empty() const;
};

// True when `state` is one of kJobStates.
bool IsValidJobState(std::string_view state);

// The per-row checks every Store applies before writing (see the contract above).
Status ValidateBatch(const WriteBatch& batch);

class Store {  // thread-safe
 public:
  virtual ~Store() = default;
  // Durable when it returns OK: the batch is in the database and fsynced (per the sync
  // option). Concurrent callers may be grouped into one transaction (group commit). An
  // error means nothing of the batch was applied. FailedPrecondition after Close.
  virtual Status Commit(WriteBatch batch) = 0;
  virtual StatusOr<std::vector<JobRow>> LoadJobs() = 0;  // all, by id
  // One job's row; nullopt when there is none.
  virtual StatusOr<std::optional<JobRow>> LoadJob(uint64_t id) = 0;
  // Intervals overlapping [since_us, until_us) (open intervals reach to infinity), by
  // start_us then insertion order.
  virtual StatusOr<std::vector<UsageRow>> LoadUsage(int64_t since_us, int64_t until_us) = 0;
  // A page of jobs: ids above `after_id` submitted in [submit_since_us, submit_until_us),
  // by id, at most `limit` (0: no limit). The SQLite and in-memory stores read from
  // after_id on, not the whole table; the default filters LoadJobs.
  virtual StatusOr<std::vector<JobRow>> LoadJobsPage(uint64_t after_id, int64_t submit_since_us,
                                                     int64_t submit_until_us, size_t limit);
  // Every interval of the jobs with ids in [first_job, last_job], open ones included, by
  // job, then start_us, then insertion order. The default filters LoadUsage.
  virtual StatusOr<std::vector<UsageRow>> LoadUsageOfJobs(uint64_t first_job, uint64_t last_job);
  virtual StatusOr<std::vector<TokenRow>> LoadTokens() = 0;  // by hash
  virtual StatusOr<std::optional<std::string>> GetKv(std::string_view key) = 0;
  // Every (key, value) whose key starts with `prefix`, by key.
  virtual StatusOr<std::vector<std::pair<std::string, std::string>>> ListKv(
      std::string_view prefix) = 0;
  // Stops accepting commits, finishes those already submitted, releases resources.
  // Idempotent; destructors call it.
  virtual Status Close() = 0;
};

// A Store that passes every call to another, which it owns (or, built from a plain
// pointer, borrows: then Close leaves the other open): a subclass overrides what it
// watches or changes (store/commit_watch.h times commits). Thread-safe as the wrapped
// store is.
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::unique_ptr<Store> inner)
      : owned_(std::move(inner)), inner_(owned_.get()) {}
  explicit ForwardingStore(Store* borrowed) : inner_(borrowed) {}

  Status Commit(WriteBatch batch) override { return inner_->Commit(std::move(batch)); }
  StatusOr<std::vector<JobRow>> LoadJobs() override { return inner_->LoadJobs(); }
  StatusOr<std::optional<JobRow>> LoadJob(uint64_t id) override { return inner_->LoadJob(id); }
  StatusOr<std::vector<UsageRow>> LoadUsage(int64_t since_us, int64_t until_us) override {
    return inner_->LoadUsage(since_us, until_us);
  }
  StatusOr<std::vector<JobRow>> LoadJobsPage(uint64_t after_id, int64_t submit_since_us,
                                             int64_t submit_until_us, size_t limit) override {
    return inner_->LoadJobsPage(after_id, submit_since_us, submit_until_us, limit);
  }
  StatusOr<std::vector<UsageRow>> LoadUsageOfJobs(uint64_t first_job, uint64_t last_job) override {
    return inner_->LoadUsageOfJobs(first_job, last_job);
  }
  StatusOr<std::vector<TokenRow>> LoadTokens() override { return inner_->LoadTokens(); }
  StatusOr<std::optional<std::string>> GetKv(std::string_view key) override {
    return inner_->GetKv(key);
  }
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListKv(
      std::string_view prefix) override {
    return inner_->ListKv(prefix);
  }
  Status Close() override { return owned_ != nullptr ? owned_->Close() : Status::Ok(); }

  Store* inner() const { return inner_; }

 private:
  std::unique_ptr<Store> owned_;  // null when borrowed
  Store* inner_;
};

// A Store in memory, for unit tests of other layers: same semantics and checks as the
// SQLite store, nothing durable. Thread-safe (one mutex).
class InMemoryStore final : public Store {
 public:
  InMemoryStore() = default;
  ~InMemoryStore() override = default;

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

  // Test hook: while set to an error, every Commit fails with it and applies nothing.
  // Status::Ok() clears it.
  void InjectCommitError(Status error);
  // Number of successful Commit calls.
  uint64_t commits() const;

 private:
  mutable Mutex mu_;
  bool closed_ GUARDED_BY(mu_) = false;
  Status inject_ GUARDED_BY(mu_);
  uint64_t commits_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, JobRow> jobs_ GUARDED_BY(mu_);
  // (tenant, key) -> id
  std::map<std::pair<std::string, std::string>, uint64_t> idempotency_ GUARDED_BY(mu_);
  std::vector<UsageRow> usage_ GUARDED_BY(mu_);  // in insertion order
  std::map<std::string, TokenRow, std::less<>> tokens_ GUARDED_BY(mu_);
  std::map<std::string, std::string, std::less<>> kv_ GUARDED_BY(mu_);
};

}  // namespace tessera
