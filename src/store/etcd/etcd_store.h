// EtcdStore: the Store on an etcd v3 cluster, for controllers that outgrow one machine.
//
// Layout under options.prefix (default "/tessera/"), numbers zero-padded to 20 digits so
// that key order is numeric order; values are protobuf (store/etcd/proto/rows.proto):
//   jobs/<id>                 JobValue
//   usage/<job>/<seq>         UsageValue (seq: insertion order, from the commit marker)
//   tokens/<hash>             TokenValue
//   kv/<key>                  the raw value
//   idem/<len(tenant)>:<tenant><key>   the owning job's id (idempotency index)
//   meta/commit               CommitMarker: rewritten by every transaction
// Commit: group commit (store/group_commit.h). Commit hands its batch to one committer
// thread, which takes every waiting batch, reads what the batches need (the jobs' rows and
// idempotency keys), applies them in order in memory (a batch that reuses another job's
// idempotency key fails alone with AlreadyExists and leaves no trace), and writes the
// group in as few Txns as max_txn_ops and max_txn_bytes allow (one when it fits). Every
// Txn is conditioned on the commit marker's mod revision (so the reads it was built on are
// still current; if another writer got in first the group is read and built again) and,
// with a fence, on the fence key's create revision. A batch that cannot fit in one Txn on
// its own fails with InvalidArgument naming --max-txn-ops / --max-request-bytes: a batch
// is never split.
// Production etcd should run with --max-txn-ops 10000 --max-request-bytes 33554432 (and
// these options raised to match); etcd's defaults (128, 1.5 MiB) hold small groups only.
// Fencing: SetFence(key, rev) conditions every later Txn on create_revision(key) == rev;
// when that fails Commit returns Unavailable("fenced: ...") with nothing applied (a 503 to
// API clients, who go on to the leader),
// and options.on_fenced is called once, from the committer thread (it must not block).
// Errors: etcd unreachable or without quorum -> Unavailable within deadline_ms. A Txn whose
// answer was lost is looked up by its nonce in the commit marker and retried when it was
// not applied; when that cannot be settled before the deadline, Commit returns Unavailable
// and the batch MAY have been applied (unlike SQLite's "nothing applied"): callers treat
// Unavailable as "not acknowledged", and their retries must be idempotent (upserts are).
// Reads are linearizable (they see every batch whose Commit returned OK) and page through
// large ranges at one revision. LoadUsage scans every usage row (no index by time).
// Thread safety: every public method is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "store/etcd/etcd_client.h"
#include "store/group_commit.h"
#include "store/store.h"

namespace tessera {

struct EtcdStoreOptions {
  std::vector<std::string> endpoints;  // "host:port", at least one
  std::string prefix = "/tessera/";    // every key of the store starts with it
  // TLS (PEM files) and authentication to etcd: see EtcdClientOptions.
  std::string ca_file, cert_file, key_file;
  std::string user, password;
  // Deadline of each etcd call and of one Commit, retries included. Default 5000 ms.
  int deadline_ms = 5000;
  // Operations per Txn at most: etcd's --max-txn-ops (default 128).
  size_t max_txn_ops = 128;
  // Bytes of keys and values per Txn at most, under etcd's --max-request-bytes (default
  // 1.5 MiB). Default 1.25 MiB.
  size_t max_txn_bytes = 1280 * 1024;
  // Called once (from the committer thread, must not block) when a fenced write is refused.
  std::function<void()> on_fenced;
};

// The client options of the store's cluster: its endpoints, TLS, credentials and deadline
// (also for a driver's own calls to that cluster, e.g. leader election).
EtcdClientOptions ToEtcdClientOptions(const EtcdStoreOptions& options);

class EtcdStore final : public Store {
 public:
  // Connects and reads the commit marker: Unavailable when etcd does not answer.
  static StatusOr<std::unique_ptr<EtcdStore>> Open(EtcdStoreOptions options);
  ~EtcdStore() override;
  EtcdStore(const EtcdStore&) = delete;
  EtcdStore& operator=(const EtcdStore&) = delete;

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

  // Every later Txn is conditioned on create_revision(key) == create_revision.
  void SetFence(std::string key, int64_t create_revision);
  void ClearFence();

  // Write Txns sent and applied so far (for tests and benchmarks of group commit).
  uint64_t txns() const { return txns_.load(std::memory_order_relaxed); }
  // The store's client, to share its connections (leader election).
  std::shared_ptr<EtcdClient> client() const { return client_; }
  const EtcdStoreOptions& options() const { return options_; }

 private:
  using Write = GroupCommit::Write;
  struct Group;  // one group's write in progress, and its steps' shared state
  // What a step of a group's write leaves to do: go on, try the rest again from a fresh
  // marker (next attempt), or stop trying (fenced, a hard error, or nothing left).
  enum class Step { kGo, kAgain, kStop };

  EtcdStore(EtcdStoreOptions options, std::shared_ptr<EtcdClient> client);
  // group_commit_'s WriteGroupFn: tries the group until every write is settled, the
  // deadline passes or kMaxAttempts; sets every write's status.
  Status WriteGroup(std::span<Write* const> writes);
  // Copies the fence for the group; false when the current fence was already refused.
  bool TakeFence(Group& group);
  // One try at the group's remaining writes, from the marker as the committer knows it.
  Step Attempt(Group& group);
  // Reads the marker again (after a lost answer or a failed group) and settles a lost Txn
  // that it shows applied.
  Step RefreshMarker(Group& group);
  // Reads the rows the simulation needs: the jobs written and the owners of their keys.
  Step ReadRows(Group& group);
  // Applies the remaining batches in order, writing a Txn whenever the next would not fit.
  Step BuildAndWrite(Group& group);
  // Writes the Txn built so far (its batches' writes, the marker's next_seq).
  Step FlushTxn(Group& group, uint64_t next_seq);
  StatusOr<EtcdTxnResult> SendTxn(Group& group, const std::string& nonce, uint64_t next_seq);
  Step OnTxnError(Group& group, const Status& error, const std::string& nonce, uint64_t next_seq);
  // The Txn's compare failed: the fence changed (kStop), or the marker moved.
  Step OnTxnRefused(Group& group, const EtcdTxnResult& answer);
  // Settles the batches of the lost Txn `nonce` that turned out applied at marker `rev`.
  void Settle(Group& group, const std::string& nonce, int64_t rev);
  // Gives every write still unsettled its error; notes a refused fence (on_fenced).
  void FinishGroup(Group& group);
  // Reads the commit marker into marker_rev_ / next_usage_seq_; its nonce into *nonce.
  Status ReadMarker(EtcdClient::Deadline deadline, std::string* nonce);
  // Every key in [begin, end) at one revision, page by page; visit returns false to stop.
  Status Scan(const std::string& begin, const std::string& end,
              const std::function<bool(const EtcdKeyValue&)>& visit);
  Status CheckOpen() const;

  const EtcdStoreOptions options_;
  std::shared_ptr<EtcdClient> client_;

  Mutex mu_;
  std::string fence_key_ GUARDED_BY(mu_);
  int64_t fence_rev_ GUARDED_BY(mu_) = 0;
  bool fenced_ GUARDED_BY(mu_) = false;  // the current fence was refused: fail at once
  std::unique_ptr<GroupCommit> group_commit_;  // set once Open has read the marker
  std::atomic<uint64_t> txns_{0};
  std::atomic<bool> closed_{false};

  // The committer thread's view of the commit marker.
  bool marker_known_ = false;
  int64_t marker_rev_ = 0;
  uint64_t next_usage_seq_ = 1;
  uint64_t nonce_counter_ = 0;
  std::string nonce_base_;

  Mutex close_mu_;  // serialises Close
};

// Opens the etcd store (see EtcdStore::Open).
StatusOr<std::unique_ptr<Store>> OpenEtcdStore(EtcdStoreOptions options);

}  // namespace tessera
