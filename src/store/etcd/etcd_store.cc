// EtcdStore: opening, writing a group (GroupCommit's WriteGroupFn) and fencing (reads:
// etcd_store_read.cc). See etcd_store.h.
#include "base/mutex.h"
#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "store/etcd/etcd_store_codec.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using etcd_store::Keys;

constexpr int kMaxAttempts = 20;    // per group: marker conflicts and lost answers
constexpr size_t kOpOverhead = 16;  // bytes of framing counted per operation

// Unavailable, as a client should take it: this controller cannot write, the leader can
// (the API answers 503 and clients go on to the next controller).
Status FencedError() {
  return UnavailableError("fenced: this controller is no longer the leader");
}

// The writes of one batch or one Txn: the last value per key (nullopt: delete).
struct Writes {
  std::map<std::string, std::optional<std::string>> ops;
  size_t bytes = 0;

  void Set(std::string key, std::optional<std::string> value) {
    bytes += key.size() + (value ? value->size() : 0) + kOpOverhead;
    ops.insert_or_assign(std::move(key), std::move(value));
  }
  void Merge(Writes&& other) {
    for (auto& [key, value] : other.ops) {
      Set(key, std::move(value));
    }
  }
};

// Whether `ops` operations of `bytes` bytes fit in one Txn.
bool FitsInOneTxn(size_t ops, size_t bytes, const EtcdStoreOptions& options) {
  return ops <= options.max_txn_ops && bytes <= options.max_txn_bytes;
}

// A batch's writes (and the marker) do not fit in one Txn: a batch is never split.
Status TooLargeError(const Writes& writes, const EtcdStoreOptions& options) {
  return InvalidArgumentError(
      "etcd store: a batch of " + std::to_string(writes.ops.size() + 1) + " operations (" +
      std::to_string(writes.bytes) + " bytes) does not fit in one etcd transaction (at most " +
      std::to_string(options.max_txn_ops) + " operations, etcd's --max-txn-ops, and " +
      std::to_string(options.max_txn_bytes) +
      " bytes, under --max-request-bytes); run etcd with --max-txn-ops 10000 "
      "--max-request-bytes 33554432 and raise the store's max_txn_ops and max_txn_bytes");
}

// The group's batches applied in order in memory, from the rows read for them, to find
// each batch's idempotency conflicts and its writes.
class Simulation {
 public:
  using TenantKey = std::pair<std::string, std::string>;

  // owner: the job id of each idempotency key read; job_key: each job read's key ("" none).
  Simulation(const Keys& keys, std::map<TenantKey, uint64_t> owner,
             std::map<uint64_t, TenantKey> job_key, uint64_t next_seq)
      : keys_(keys), owner_(std::move(owner)), job_key_(std::move(job_key)), next_seq_(next_seq) {}

  // Applies one batch: its writes, or AlreadyExists (and no change) on a conflict.
  Status Apply(const WriteBatch& batch, Writes* writes) {
    undo_owner_.clear();
    undo_job_.clear();
    seq_before_ = next_seq_;
    for (const JobRow& job : batch.jobs) {
      TenantKey now{job.tenant, job.idempotency_key};
      if (!job.idempotency_key.empty()) {
        auto found = owner_.find(now);
        if (found != owner_.end() && found->second != job.id) {
          Status conflict =
              AlreadyExistsError("job " + std::to_string(job.id) + ": tenant '" + job.tenant +
                                 "' already has job " + std::to_string(found->second) +
                                 " with idempotency key '" + job.idempotency_key + "'");
          Undo();
          return conflict;
        }
      }
      TenantKey before;
      if (auto it = job_key_.find(job.id); it != job_key_.end()) {
        before = it->second;
      }
      if (before != now || job.idempotency_key.empty()) {
        if (!before.second.empty()) {
          SetOwner(before, std::nullopt);
          writes->Set(keys_.Idempotency(before.first, before.second), std::nullopt);
        }
        if (!now.second.empty()) {
          SetOwner(now, job.id);
          writes->Set(keys_.Idempotency(now.first, now.second), std::to_string(job.id));
        }
      }
      undo_job_.emplace_back(job.id, job_key_.count(job.id) > 0
                                         ? std::optional<TenantKey>(job_key_[job.id])
                                         : std::nullopt);
      job_key_[job.id] = job.idempotency_key.empty() ? TenantKey{} : now;
      writes->Set(keys_.Job(job.id), etcd_store::EncodeJob(job));
    }
    for (const UsageRow& usage : batch.usage) {
      writes->Set(keys_.Usage(usage.job, next_seq_++), etcd_store::EncodeUsage(usage));
    }
    for (const TokenRow& token : batch.tokens) {
      writes->Set(keys_.Token(token.hash), etcd_store::EncodeToken(token));
    }
    for (const auto& [key, value] : batch.kv) {
      writes->Set(keys_.Kv(key), value);
    }
    return Status::Ok();
  }

  // Takes back the last Apply.
  void Undo() {
    while (!undo_owner_.empty()) {
      auto& [key, value] = undo_owner_.back();
      if (value) {
        owner_[key] = *value;
      } else {
        owner_.erase(key);
      }
      undo_owner_.pop_back();
    }
    while (!undo_job_.empty()) {
      auto& [id, value] = undo_job_.back();
      if (value) {
        job_key_[id] = *value;
      } else {
        job_key_.erase(id);
      }
      undo_job_.pop_back();
    }
    next_seq_ = seq_before_;
  }

  uint64_t next_seq() const { return next_seq_; }

 private:
  void SetOwner(const TenantKey& key, std::optional<uint64_t> id) {
    auto found = owner_.find(key);
    undo_owner_.emplace_back(
        key, found == owner_.end() ? std::nullopt : std::optional<uint64_t>(found->second));
    if (id) {
      owner_[key] = *id;
    } else if (found != owner_.end()) {
      owner_.erase(found);
    }
  }

  const Keys& keys_;
  std::map<TenantKey, uint64_t> owner_;
  std::map<uint64_t, TenantKey> job_key_;
  uint64_t next_seq_;
  uint64_t seq_before_ = 0;
  std::vector<std::pair<TenantKey, std::optional<uint64_t>>> undo_owner_;
  std::vector<std::pair<uint64_t, std::optional<TenantKey>>> undo_job_;
};

}  // namespace

// One group's write in progress: what its steps (Attempt, ReadRows, FlushTxn, ...) share.
struct EtcdStore::Group {
  // A Txn whose answer was lost: the batches it carried with their outcomes.
  struct Lost {
    std::vector<std::pair<Write*, Status>> results;
    uint64_t next_seq = 1;
    int64_t base_rev = 0;  // the marker revision the Txn was conditioned on
  };

  Group(const std::string& prefix, Clock::time_point deadline_at, std::span<Write* const> writes)
      : keys{prefix}, deadline(deadline_at), remaining(writes.begin(), writes.end()) {}

  bool fenced() const { return !fence_key.empty(); }
  // The write is settled: its caller gets `status`.
  void Finish(Write* write, Status status) {
    write->status = std::move(status);
    if (auto it = std::find(remaining.begin(), remaining.end(), write); it != remaining.end()) {
      remaining.erase(it);
    }
  }
  // The Txn of `results` was applied: each batch gets its own outcome.
  void FinishResults() {
    for (auto& [write, status] : results) {
      Finish(write, std::move(status));
    }
    results.clear();
  }

  const Keys keys;
  const Clock::time_point deadline;
  std::string fence_key;  // "": the group is not fenced
  int64_t fence_rev = 0;
  std::map<std::string, Lost> lost;  // by the Txn's nonce
  std::deque<Write*> remaining;      // not settled yet, in queue order
  Status last_error = UnavailableError("etcd store: commit not attempted");
  // This attempt's reads: the job id owning each idempotency key read, and each job read's
  // key (empty: none).
  std::map<Simulation::TenantKey, uint64_t> owner;
  std::map<uint64_t, Simulation::TenantKey> job_key;
  // The Txn being built: its writes, and the batches it carries with their outcomes.
  Writes txn;
  std::vector<std::pair<Write*, Status>> results;
};

EtcdStore::EtcdStore(EtcdStoreOptions options, std::shared_ptr<EtcdClient> client)
    : options_(std::move(options)), client_(std::move(client)) {
  std::random_device random;
  nonce_base_ = std::to_string(random()) + "-" + std::to_string(random()) + "-";
}

EtcdStore::~EtcdStore() { static_cast<void>(Close()); }

StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Open(EtcdStoreOptions options) {
  if (options.prefix.empty()) {
    return InvalidArgumentError("etcd store: the key prefix must not be empty");
  }
  if (options.max_txn_ops < 2) {
    return InvalidArgumentError("etcd store: max_txn_ops must be at least 2");
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                           EtcdClient::Create(ToEtcdClientOptions(options)));
  std::unique_ptr<EtcdStore> store(
      new EtcdStore(std::move(options), std::shared_ptr<EtcdClient>(std::move(client))));
  std::string nonce;
  TESSERA_RETURN_IF_ERROR(store->ReadMarker({}, &nonce));
  store->group_commit_ = std::make_unique<GroupCommit>(
      [s = store.get()](std::span<Write* const> group) { return s->WriteGroup(group); },
      GroupCommit::Options{});  // every batch waiting: Txns are cut to fit as they are built
  return store;
}

Status EtcdStore::ReadMarker(EtcdClient::Deadline deadline, std::string* nonce) {
  const Keys keys{options_.prefix};
  TESSERA_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, client_->Get(keys.Marker(), deadline));
  marker_rev_ = 0;
  next_usage_seq_ = 1;
  nonce->clear();
  if (kv) {
    std::optional<etcd_store::Marker> marker = etcd_store::DecodeMarker(kv->value);
    if (!marker) {
      return FailedPreconditionError("etcd store: " + keys.Marker() +
                                     " is not a Tessera commit marker");
    }
    marker_rev_ = kv->mod_revision;
    next_usage_seq_ = marker->next_usage_seq;
    *nonce = marker->nonce;
  }
  marker_known_ = true;
  return Status::Ok();
}

Status EtcdStore::Commit(WriteBatch batch) {
  TESSERA_RETURN_IF_ERROR(ValidateBatch(batch));
  return group_commit_->Commit(batch);
}

void EtcdStore::SetFence(std::string key, int64_t create_revision) {
  MutexLock lock(mu_);
  fence_key_ = std::move(key);
  fence_rev_ = create_revision;
  fenced_ = false;
}

void EtcdStore::ClearFence() {
  MutexLock lock(mu_);
  fence_key_.clear();
  fence_rev_ = 0;
  fenced_ = false;
}

Status EtcdStore::WriteGroup(std::span<Write* const> writes) {
  Group group(options_.prefix, Clock::now() + std::chrono::milliseconds(options_.deadline_ms),
              writes);
  if (!TakeFence(group)) {
    for (Write* write : writes) {
      write->status = FencedError();
    }
    return Status::Ok();
  }
  for (int attempt = 0; attempt < kMaxAttempts && !group.remaining.empty(); ++attempt) {
    if (Clock::now() >= group.deadline || Attempt(group) == Step::kStop) {
      break;
    }
  }
  FinishGroup(group);
  return Status::Ok();  // every write has its own status
}

bool EtcdStore::TakeFence(Group& group) {
  MutexLock lock(mu_);
  if (!fence_key_.empty() && fenced_) {
    return false;
  }
  group.fence_key = fence_key_;
  group.fence_rev = fence_rev_;
  return true;
}

EtcdStore::Step EtcdStore::Attempt(Group& group) {
  if (!marker_known_) {
    if (const Step step = RefreshMarker(group); step != Step::kGo) {
      return step;
    }
  }
  if (const Step step = ReadRows(group); step != Step::kGo) {
    return step;
  }
  return BuildAndWrite(group);
}

EtcdStore::Step EtcdStore::RefreshMarker(Group& group) {
  std::string nonce;
  Status read = ReadMarker(group.deadline, &nonce);
  if (!read.ok()) {
    group.last_error = read;
    return read.code() == StatusCode::kUnavailable ? Step::kAgain : Step::kStop;
  }
  Settle(group, nonce, marker_rev_);
  return group.remaining.empty() ? Step::kStop : Step::kGo;
}

EtcdStore::Step EtcdStore::ReadRows(Group& group) {
  std::set<uint64_t> ids;
  std::set<Simulation::TenantKey> idem_set;
  for (Write* write : group.remaining) {
    for (const JobRow& job : write->batch->jobs) {
      ids.insert(job.id);
      if (!job.idempotency_key.empty()) {
        idem_set.emplace(job.tenant, job.idempotency_key);
      }
    }
  }
  const std::vector<Simulation::TenantKey> idem(idem_set.begin(), idem_set.end());
  std::vector<EtcdOp> reads;
  for (uint64_t id : ids) {
    reads.push_back(EtcdOp::Get(group.keys.Job(id)));
  }
  for (const auto& [tenant, key] : idem) {
    reads.push_back(EtcdOp::Get(group.keys.Idempotency(tenant, key)));
  }
  group.owner.clear();
  group.job_key.clear();
  for (size_t begin = 0; begin < reads.size(); begin += options_.max_txn_ops) {
    const size_t end = std::min(reads.size(), begin + options_.max_txn_ops);
    std::vector<EtcdOp> chunk(reads.begin() + static_cast<std::ptrdiff_t>(begin),
                              reads.begin() + static_cast<std::ptrdiff_t>(end));
    auto answer = client_->Txn({}, chunk, {}, group.deadline);
    if (!answer.ok()) {
      group.last_error = answer.status();
      return answer.status().code() == StatusCode::kUnavailable ? Step::kAgain : Step::kStop;
    }
    for (size_t i = 0; i < answer->responses.size() && begin + i < ids.size() + idem.size(); ++i) {
      if (answer->responses[i].kvs.empty()) {
        continue;
      }
      const EtcdKeyValue& kv = answer->responses[i].kvs[0];
      if (begin + i < ids.size()) {
        if (auto row = etcd_store::DecodeJob(kv.value)) {
          group.job_key[row->id] = row->idempotency_key.empty()
                                       ? Simulation::TenantKey{}
                                       : Simulation::TenantKey{row->tenant, row->idempotency_key};
        }
      } else {
        group.owner[idem[begin + i - ids.size()]] = std::strtoull(kv.value.c_str(), nullptr, 10);
      }
    }
  }
  return Step::kGo;
}

EtcdStore::Step EtcdStore::BuildAndWrite(Group& group) {
  Simulation sim(group.keys, std::move(group.owner), std::move(group.job_key), next_usage_seq_);
  group.txn = Writes{};
  group.results.clear();
  const std::vector<Write*> order(group.remaining.begin(), group.remaining.end());
  for (Write* write : order) {
    Writes writes;
    Status status = sim.Apply(*write->batch, &writes);
    if (!status.ok()) {
      writes = Writes{};  // a conflict: nothing of the batch
    } else if (!FitsInOneTxn(writes.ops.size() + 1, writes.bytes, options_)) {
      sim.Undo();
      status = TooLargeError(writes, options_);
      writes = Writes{};
    }
    if (!writes.ops.empty() && !FitsInOneTxn(group.txn.ops.size() + writes.ops.size() + 1,
                                             group.txn.bytes + writes.bytes, options_)) {
      // This batch was simulated after the Txn's batches: it goes in the next one.
      if (const Step step = FlushTxn(group, sim.next_seq()); step != Step::kGo) {
        return step;
      }
    }
    group.txn.Merge(std::move(writes));
    group.results.emplace_back(write, std::move(status));
  }
  return FlushTxn(group, sim.next_seq());
}

EtcdStore::Step EtcdStore::FlushTxn(Group& group, uint64_t next_seq) {
  if (group.results.empty()) {
    return Step::kGo;
  }
  if (group.txn.ops.empty()) {  // every batch failed alone: nothing to write
    group.FinishResults();
    return Step::kGo;
  }
  const std::string nonce = nonce_base_ + std::to_string(++nonce_counter_);
  StatusOr<EtcdTxnResult> answer = SendTxn(group, nonce, next_seq);
  if (!answer.ok()) {
    return OnTxnError(group, answer.status(), nonce, next_seq);
  }
  if (answer->succeeded) {
    txns_.fetch_add(1, std::memory_order_relaxed);
    marker_rev_ = answer->revision;
    next_usage_seq_ = next_seq;
    group.lost.clear();  // conditioned on an older marker: they can no longer apply
    group.FinishResults();
    return Step::kGo;
  }
  group.results.clear();
  return OnTxnRefused(group, *answer);
}

StatusOr<EtcdTxnResult> EtcdStore::SendTxn(Group& group, const std::string& nonce,
                                           uint64_t next_seq) {
  std::vector<EtcdCompare> compares;
  std::vector<EtcdOp> success, failure;
  if (group.fenced()) {
    compares.push_back(EtcdCompare::CreateRevision(group.fence_key, group.fence_rev));
    failure.push_back(EtcdOp::Get(group.fence_key));
  }
  compares.push_back(EtcdCompare::ModRevision(group.keys.Marker(), marker_rev_));
  failure.push_back(EtcdOp::Get(group.keys.Marker()));
  for (auto& [key, value] : group.txn.ops) {
    success.push_back(value ? EtcdOp::Put(key, std::move(*value)) : EtcdOp::Delete(key));
  }
  success.push_back(EtcdOp::Put(group.keys.Marker(), etcd_store::EncodeMarker({nonce, next_seq})));
  auto answer = client_->Txn(compares, success, failure, group.deadline);
  group.txn = Writes{};
  return answer;
}

EtcdStore::Step EtcdStore::OnTxnError(Group& group, const Status& error, const std::string& nonce,
                                      uint64_t next_seq) {
  group.last_error = error;
  if (EtcdOutcomeUnknown(error)) {
    group.lost[nonce] = Group::Lost{group.results, next_seq, marker_rev_};
    marker_known_ = false;
  } else if (error.code() != StatusCode::kUnavailable) {
    // A hard error fails the Txn's batches; the later batches were built on its writes and
    // are built again. (Unavailable: not sent, build it again.)
    for (auto& [write, status] : group.results) {
      group.Finish(write, error);
    }
  }
  group.results.clear();
  return Step::kAgain;
}

EtcdStore::Step EtcdStore::OnTxnRefused(Group& group, const EtcdTxnResult& answer) {
  size_t r = 0;
  if (group.fenced()) {
    const auto& fence = answer.responses[r++].kvs;
    if (fence.empty() || fence[0].create_revision != group.fence_rev) {
      group.last_error = FencedError();
      return Step::kStop;
    }
  }
  // The marker moved: another writer, or a lost Txn of ours applied after all.
  const auto& marker = answer.responses[r].kvs;
  marker_rev_ = marker.empty() ? 0 : marker[0].mod_revision;
  std::optional<etcd_store::Marker> decoded =
      marker.empty() ? std::nullopt : etcd_store::DecodeMarker(marker[0].value);
  next_usage_seq_ = decoded ? decoded->next_usage_seq : 1;
  Settle(group, decoded ? decoded->nonce : "", marker_rev_);
  group.last_error =
      UnavailableError("etcd store: commit gave up after " + std::to_string(kMaxAttempts) +
                       " tries: another writer kept moving the commit marker");
  return Step::kAgain;
}

void EtcdStore::Settle(Group& group, const std::string& nonce, int64_t rev) {
  auto it = group.lost.find(nonce);
  if (it == group.lost.end()) {
    // Those conditioned on another revision can no longer apply.
    for (auto l = group.lost.begin(); l != group.lost.end();) {
      l = l->second.base_rev != rev ? group.lost.erase(l) : std::next(l);
    }
    return;
  }
  for (auto& [write, status] : it->second.results) {
    group.Finish(write, status);
  }
  txns_.fetch_add(1, std::memory_order_relaxed);
  group.lost.clear();
}

void EtcdStore::FinishGroup(Group& group) {
  const Status& last_error = group.last_error;
  const bool fenced = last_error.code() == FencedError().code() &&
                      last_error.message() == FencedError().message();
  if (fenced) {
    bool call = false;
    {
      MutexLock lock(mu_);
      if (fence_key_ == group.fence_key && fence_rev_ == group.fence_rev && !fenced_) {
        fenced_ = true;
        call = true;
      }
    }
    if (call && options_.on_fenced) {
      options_.on_fenced();
    }
  }
  for (Write* write : group.remaining) {
    if (fenced) {
      write->status = FencedError();
      continue;
    }
    bool maybe = false;
    for (const auto& [nonce, lost] : group.lost) {
      for (const auto& [carried, status] : lost.results) {
        maybe = maybe || carried == write;
      }
    }
    write->status = Status(
        last_error.ok() ? StatusCode::kUnavailable : last_error.code(),
        last_error.message() + (maybe ? " (the batch may or may not have been applied)" : ""));
    marker_known_ = false;
  }
}

Status EtcdStore::CheckOpen() const {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  return Status::Ok();
}

Status EtcdStore::Close() {
  MutexLock close_lock(close_mu_);
  if (closed_.exchange(true)) {
    return Status::Ok();
  }
  if (group_commit_ != nullptr) {
    group_commit_->Stop();  // writes what is queued; later Commits are refused
  }
  return Status::Ok();
}

EtcdClientOptions ToEtcdClientOptions(const EtcdStoreOptions& options) {
  EtcdClientOptions client;
  client.endpoints = options.endpoints;
  client.ca_file = options.ca_file;
  client.cert_file = options.cert_file;
  client.key_file = options.key_file;
  client.user = options.user;
  client.password = options.password;
  client.deadline_ms = options.deadline_ms;
  return client;
}

StatusOr<std::unique_ptr<Store>> OpenEtcdStore(EtcdStoreOptions options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<EtcdStore> store, EtcdStore::Open(std::move(options)));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace tessera
